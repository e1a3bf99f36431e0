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
