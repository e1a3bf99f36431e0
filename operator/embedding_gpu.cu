/*
 * operator/embedding_gpu.cu — Embedding on a GPU: the forward gathers, one thread per
 * output element; the backward scatters with atomicAdd (several indices may name one row),
 * so the order of the additions, and the last bits of a row hit many times, may differ
 * from the CPU's.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/embedding.h"
}

extern "C" int mxc__embedding_gpu(const float *idx, const float *weight, float *out, int64_t n,
                                  int64_t rows, int64_t dim, int req, void *stream) {
    if (req == MXC__REQ_NULL || dim <= 0)
        return MXC_OK;
    return mxc__launch(n * dim, stream, "Embedding", [=] __device__(int64_t k) {
        const int64_t i = k / dim, j = k - i * dim;
        mxc__put(req, out, k, weight[mxc__embedding_row(idx[i], rows) * dim + j]);
    });
}

extern "C" int mxc__embedding_grad_gpu(const float *idx, const float *dout, float *dweight,
                                       int64_t n, int64_t rows, int64_t dim, void *stream) {
    if (dim <= 0)
        return MXC_OK;
    return mxc__launch(n * dim, stream, "Embedding backward", [=] __device__(int64_t k) {
        const int64_t i = k / dim, j = k - i * dim;
        atomicAdd(&dweight[mxc__embedding_row(idx[i], rows) * dim + j], dout[k]);
    });
}
