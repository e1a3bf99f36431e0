/*
 * operator/crop_gpu.cu — Crop on a GPU: one thread per element written (the crop forward,
 * data's gradient backward), each the constant-mode gather of operator/pad_math.h that the
 * CPU kernels (operator/crop.c) run.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/pad_math.h"
}

extern "C" int mxc__crop_gpu(const float *src, float *dst, int64_t n,
                             const struct mxc__pad_view *vp, int req, void *stream) {
    const struct mxc__pad_view v = *vp;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "Crop", [=] __device__(int64_t e) {
        mxc__put(req, dst, e, mxc__pad_value(src, e, &v));
    });
}
