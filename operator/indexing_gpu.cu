/*
 * operator/indexing_gpu.cu — where, take, pick, one_hot, argmax and argmin on a GPU: one
 * thread per output element (argmax: per output, walking its row), the rules from
 * operator/indexing.h. take's backward scatters with atomicAdd (several indices may name
 * one element), so the order of its additions, and the last bits of an element hit many
 * times, may differ from the CPU's.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/indexing.h"
}

extern "C" int mxc__index_find_outside_gpu(const float *v, int64_t n, struct mxc__index_range r,
                                           void *mark, void *stream, int64_t *first, float *value) {
    unsigned long long *m = (unsigned long long *)mark, found;
    cudaStream_t s = (cudaStream_t)stream;
    *first = -1;
    if (n <= 0)
        return MXC_OK;
    /* all ones: no position yet; each thread outside the range lowers it to its own */
    cudaMemsetAsync(m, 0xff, sizeof *m, s);
    int rc = mxc__launch(n, stream, "index range check", [=] __device__(int64_t i) {
        if (!mxc__index_range_has(&r, v[i]))
            atomicMin(m, (unsigned long long)i);
    });
    if (rc != MXC_OK)
        return rc;
    cudaMemcpyAsync(&found, m, sizeof found, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    rc = mxc__gpu_status("index range check");
    if (rc != MXC_OK || found == ~0ull)
        return rc;
    *first = (int64_t)found;
    cudaMemcpy(value, v + found, sizeof *value, cudaMemcpyDeviceToHost);
    return mxc__gpu_status("index range check");
}

extern "C" int mxc__where_gpu(const float *cond, const float *x, const float *y, float *out,
                              int64_t size, int64_t cond_inner, int req, void *stream) {
    return mxc__launch(size, stream, "where", [=] __device__(int64_t k) {
        mxc__put(req, out, k, mxc__where(cond[k / cond_inner], x[k], y[k]));
    });
}

extern "C" int mxc__where_grad_gpu(const float *cond, const float *g, float *gx, float *gy,
                                   int64_t size, int64_t cond_inner, int req_x, int req_y,
                                   void *stream) {
    return mxc__launch(size, stream, "where backward", [=] __device__(int64_t k) {
        const float gk = g[k], ck = cond[k / cond_inner];
        mxc__put(req_y, gy, k, mxc__where(ck, 0.0f, gk));
        mxc__put(req_x, gx, k, mxc__where(ck, gk, 0.0f));
    });
}

extern "C" int mxc__take_gpu(const float *data, const float *idx, float *out, int64_t outer,
                             int64_t n, int64_t inner, int64_t m, int mode, int req, void *stream) {
    return mxc__launch(outer * m * inner, stream, "take", [=] __device__(int64_t k) {
        const int64_t r = k % inner, i = (k / inner) % m, o = k / (inner * m);
        mxc__put(req, out, k, data[(o * n + mxc__index_resolve(idx[i], n, mode)) * inner + r]);
    });
}

extern "C" int mxc__take_grad_gpu(const float *g, const float *idx, float *gdata, int64_t outer,
                                  int64_t n, int64_t inner, int64_t m, int mode, void *stream) {
    return mxc__launch(outer * m * inner, stream, "take backward", [=] __device__(int64_t k) {
        const int64_t r = k % inner, i = (k / inner) % m, o = k / (inner * m);
        atomicAdd(&gdata[(o * n + mxc__index_resolve(idx[i], n, mode)) * inner + r], g[k]);
    });
}

extern "C" int mxc__pick_gpu(const float *data, const float *idx, float *out, int64_t outer,
                             int64_t n, int64_t inner, int mode, int req, void *stream) {
    return mxc__launch(outer * inner, stream, "pick", [=] __device__(int64_t k) {
        const int64_t r = k % inner, o = k / inner;
        mxc__put(req, out, k, data[(o * n + mxc__index_resolve(idx[k], n, mode)) * inner + r]);
    });
}

extern "C" int mxc__pick_grad_gpu(const float *g, const float *idx, float *gdata, int64_t outer,
                                  int64_t n, int64_t inner, int mode, int req, void *stream) {
    return mxc__launch(outer * n * inner, stream, "pick backward", [=] __device__(int64_t k) {
        const int64_t r = k % inner, j = (k / inner) % n, o = k / (inner * n);
        const int64_t q = o * inner + r;
        mxc__put(req, gdata, k, mxc__index_resolve(idx[q], n, mode) == j ? g[q] : 0.0f);
    });
}

extern "C" int mxc__one_hot_gpu(const float *idx, float *out, int64_t m, int64_t depth, float on,
                                float off, int req, void *stream) {
    return mxc__launch(m * depth, stream, "one_hot", [=] __device__(int64_t k) {
        const int64_t i = k / depth, d = k - i * depth;
        mxc__put(req, out, k, mxc__one_hot_is(idx[i], d, depth) ? on : off);
    });
}

extern "C" int mxc__arg_extreme_gpu(const float *x, float *out, int64_t outer, int64_t n,
                                    int64_t inner, bool is_max, int req, void *stream) {
    return mxc__launch(outer * inner, stream, "argmax", [=] __device__(int64_t k) {
        const int64_t r = k % inner, o = k / inner;
        mxc__put(req, out, k, (float)mxc__arg_extreme(x + o * n * inner + r, n, inner, is_max));
    });
}

extern "C" int mxc__gather_nd_gpu(struct mxc__gather_view v, const float *data, const float *idx,
                                  float *out, int req, void *stream) {
    const int64_t inner = v.inner;
    return mxc__launch(v.count * inner, stream, "gather_nd", [=] __device__(int64_t k) {
        const int64_t y = k / inner, r = k - y * inner;
        mxc__put(req, out, k, data[mxc__gather_row(&v, idx, y) * inner + r]);
    });
}

extern "C" int mxc__gather_nd_grad_gpu(struct mxc__gather_view v, const float *g, const float *idx,
                                       float *gdata, void *stream) {
    const int64_t inner = v.inner;
    return mxc__launch(v.count * inner, stream, "gather_nd backward", [=] __device__(int64_t k) {
        const int64_t y = k / inner, r = k - y * inner;
        atomicAdd(&gdata[mxc__gather_row(&v, idx, y) * inner + r], g[k]);
    });
}
