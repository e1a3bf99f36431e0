/*
 * operator/regression_gpu.cu — the regression losses on a GPU: element-wise maps over the
 * arithmetic of operator/regression.h.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/regression.h"
}

extern "C" int mxc__reg_forward_gpu(int kind, const float *x, float *y, int64_t n, int req,
                                    void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "regression output", [=] __device__(int64_t i) {
        mxc__put(req, y, i, mxc__reg_out(kind, x[i]));
    });
}

extern "C" int mxc__reg_backward_gpu(int kind, const float *y, const float *label, float *dx,
                                     int64_t n, float scale, int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "regression output backward", [=] __device__(int64_t i) {
        mxc__put(req, dx, i, mxc__reg_grad(kind, y[i], label[i], scale));
    });
}
