/*
 * operator/sort_gpu.cu — topk, sort and argsort on a GPU by ranking: one thread per
 * element counts the elements of its row that come before it in mxc__sort_before's order
 * (operator/indexing.h); that count is its place, so it writes itself there (value and
 * index, if within the first k) and its mask, and the backward reads its head gradient from
 * there. No scratch memory and no second copy of the order; the cost is n comparisons per
 * element, O(n^2) a row: fine for the rows of classifiers and detectors (tens of thousands
 * of elements: a few hundred million comparisons spread over the GPU), slow beyond, where a
 * segmented radix sort (CUB) would be the next step. Since the order is total (ties by
 * position), the result equals the CPU's merge sort element for element.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/indexing.h"
}

/* The place of element j of the row starting at `row` (stride `inner`, n elements). */
static __device__ int64_t rank_of(const float *row, int64_t n, int64_t inner, int64_t j,
                                  bool ascend) {
    const float v = row[j * inner];
    int64_t rank = 0;
    for (int64_t i = 0; i < n; i++)
        rank += mxc__sort_before(row[i * inner], i, v, j, ascend);
    return rank;
}

extern "C" int mxc__topk_gpu(const float *x, float *value, float *index, float *mask, int64_t outer,
                             int64_t n, int64_t inner, int64_t k, bool ascend, int req_value,
                             int req_index, int req_mask, void *stream) {
    return mxc__launch(outer * n * inner, stream, "topk", [=] __device__(int64_t e) {
        const int64_t r = e % inner, j = (e / inner) % n, o = e / (inner * n);
        const float *row = x + o * n * inner + r;
        const int64_t t = rank_of(row, n, inner, j, ascend);
        mxc__put(req_mask, mask, e, t < k ? 1.0f : 0.0f);
        if (t < k) {
            const int64_t q = (o * k + t) * inner + r;
            mxc__put(req_value, value, q, row[j * inner]);
            mxc__put(req_index, index, q, (float)j);
        }
    });
}

extern "C" int mxc__topk_grad_gpu(const float *x, const float *g, float *gx, int64_t outer,
                                  int64_t n, int64_t inner, int64_t k, bool ascend, int req,
                                  void *stream) {
    return mxc__launch(outer * n * inner, stream, "topk backward", [=] __device__(int64_t e) {
        const int64_t r = e % inner, j = (e / inner) % n, o = e / (inner * n);
        const int64_t t = rank_of(x + o * n * inner + r, n, inner, j, ascend);
        mxc__put(req, gx, e, t < k ? g[(o * k + t) * inner + r] : 0.0f);
    });
}
