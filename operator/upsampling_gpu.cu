/*
 * operator/upsampling_gpu.cu — nearest UpSampling on a GPU, one input at a time: one thread
 * per element of the input's part of the output forward, one per input element backward
 * (a gather over its s x s block), with operator/upsampling_math.h's indexing that the CPU
 * kernels (operator/upsampling.c) use.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/upsampling_math.h"
}

extern "C" int mxc__up_forward_gpu(const float *x, float *y, int64_t n,
                                   const struct mxc__up_view *vp, bool add, void *stream) {
    const struct mxc__up_view v = *vp;
    return mxc__launch(n, stream, "UpSampling", [=] __device__(int64_t e) {
        int64_t oi, xi;
        mxc__up_at(e, &v, &oi, &xi);
        y[oi] = add ? y[oi] + x[xi] : x[xi];
    });
}

extern "C" int mxc__up_backward_gpu(const float *dy, float *dx, int64_t n,
                                    const struct mxc__up_view *vp, int req, void *stream) {
    const struct mxc__up_view v = *vp;
    return mxc__launch(n, stream, "UpSampling backward", [=] __device__(int64_t e) {
        mxc__put(req, dx, e, mxc__up_grad(dy, e, &v));
    });
}
