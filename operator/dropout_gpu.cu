/*
 * operator/dropout_gpu.cu — Dropout on a GPU: the uniform draws come from
 * mxc__philox_fill_gpu (the same values as the CPU's), are turned into the mask in place,
 * and the data is multiplied by the mask, broadcast along the shared axes, one thread per
 * element.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/dropout.h"
#include "operator/walk.h"
}

extern "C" int mxc__dropout_mask_gpu(float *mask, int64_t n, bool active, float keep, float scale,
                                     void *stream) {
    return mxc__launch(n, stream, "Dropout mask", [=] __device__(int64_t i) {
        mask[i] = active ? mxc__dropout_mask(mask[i], keep, scale) : 1.0f;
    });
}

extern "C" int mxc__dropout_mul_gpu(float *o, const float *a, const float *mask, int nd,
                                    const int64_t *dims, const int64_t *mdims, int req,
                                    void *stream) {
    if (req == MXC__REQ_NULL || nd > MXC_MAX_NDIM)
        return MXC_OK;
    /* the mask's stride per data axis, 0 where one value is shared */
    struct mxc__walk walk = {nd, 0};
    int64_t acc = 1, n = 1;
    for (int i = nd - 1; i >= 0; i--) {
        walk.dims[i] = dims[i];
        walk.strides[i] = mdims[i] == 1 ? 0 : acc;
        acc *= mdims[i];
        n *= dims[i];
    }
    return mxc__launch(n, stream, "Dropout", [=] __device__(int64_t j) {
        mxc__put(req, o, j, a[j] * mask[mxc__walk_at(&walk, j)]);
    });
}
