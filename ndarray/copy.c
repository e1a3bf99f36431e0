/*
 * ndarray/copy.c — byte copies between contexts: memcpy on the host, cudaMemcpyAsync on
 * the worker's stream when a GPU is involved (the engine synchronises the stream before
 * the operation retires). Without USE_CUDA a GPU context is an MXC_ENODEV error.
 */
#include "ndarray/ndarray_impl.h"

#include <string.h>

#ifdef MXC_USE_CUDA
#include <cuda_runtime.h>
#endif

static bool on_host(mxc_context c) { return c.dev_type != MXC_GPU; }

int mxc__copy_bytes(void *dst, mxc_context dst_ctx, const void *src, mxc_context src_ctx,
                    size_t nbytes, void *stream) {
    if (nbytes == 0)
        return MXC_OK;
    if (on_host(dst_ctx) && on_host(src_ctx)) {
        memcpy(dst, src, nbytes);
        return MXC_OK;
    }
#ifdef MXC_USE_CUDA
    enum cudaMemcpyKind kind = on_host(src_ctx)   ? cudaMemcpyHostToDevice
                               : on_host(dst_ctx) ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, kind, (cudaStream_t)stream);
    if (e == cudaSuccess && stream == NULL)
        e = cudaStreamSynchronize(NULL);
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "copy of %zu bytes: %s", nbytes, cudaGetErrorString(e));
    return MXC_OK;
#else
    return mxc__error(MXC_ENODEV, "copy of %zu bytes: a GPU context needs a USE_CUDA=1 build",
                      nbytes);
#endif
}
