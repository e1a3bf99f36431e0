/*
 * operator/tensor_gpu.cu — the three moves of the tensor-manipulation operators on a GPU
 * (operator/walk.h): one thread per index walked, the mapping being the MXC__HD functions
 * the CPU loops of operator/tensor.c call, the store mxc__put.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/cast.h"
#include "operator/walk.h"
}

extern "C" int mxc__walk_gather_gpu(float *dst, const float *src, struct mxc__walk w, int64_t n,
                                    int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "gather", [=] __device__(int64_t j) {
        mxc__put(req, dst, j, src[mxc__walk_at(&w, j)]);
    });
}

extern "C" int mxc__walk_gather_typed_gpu(void *dst, const void *src, struct mxc__walk w, int64_t n,
                                          int req, int dtype, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const bool add = req == MXC__REQ_ADD;
    return mxc__launch(n, stream, "gather", [=] __device__(int64_t j) {
        mxc__elem_store(dst, dtype, j, mxc__elem_load(src, dtype, mxc__walk_at(&w, j)), add);
    });
}

extern "C" int mxc__walk_scatter_gpu(float *dst, const float *src, struct mxc__walk w, int64_t n,
                                     int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "scatter", [=] __device__(int64_t j) {
        mxc__put(req, dst, mxc__walk_at(&w, j), src[j]);
    });
}

extern "C" int mxc__walk_sum_gpu(float *dst, const float *src, struct mxc__walk w,
                                 struct mxc__walk t, int64_t count, int64_t n, int req,
                                 void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "sum of copies", [=] __device__(int64_t k) {
        mxc__put(req, dst, k, mxc__walk_sum_at(&w, &t, count, src, k));
    });
}
