/*
 * operator/cast_gpu.cu — Cast and the dtype-generic copy on a GPU: one thread per element
 * calling the MXC__HD load and store of operator/cast.h, as the CPU loop does; a write
 * under one dtype is a cudaMemcpyAsync (float32 goes to operator/copy_gpu.cu's copy).
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/cast.h"
#include "operator/copy_gpu.h"
}

extern "C" int mxc__cast_gpu(void *dst, int dt, const void *src, int st, int64_t n, int req,
                             void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    if (dt == MXC_FLOAT32 && st == MXC_FLOAT32)
        return mxc__copy_req_gpu((float *)dst, (const float *)src, n, req, stream);
    const bool add = req == MXC__REQ_ADD;
    if (st == dt && !add) {
        if (dst == src || n <= 0)
            return MXC_OK;
        cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)n * mxc_dtype_size(dt),
                                        cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
        if (e != cudaSuccess)
            return mxc__error(MXC_EDEVICE, "copy: cudaMemcpyAsync of %lld %s: %s", (long long)n,
                              mxc_dtype_name(dt), cudaGetErrorString(e));
        return MXC_OK;
    }
    return mxc__launch(n, stream, "Cast", [=] __device__(int64_t k) {
        mxc__elem_store(dst, dt, k, mxc__elem_load(src, st, k), add);
    });
}

extern "C" int mxc__copy_req_typed_gpu(void *dst, const void *src, int64_t n, int dtype, int req,
                                       void *stream) {
    return mxc__cast_gpu(dst, dtype, src, dtype, n, req, stream);
}
