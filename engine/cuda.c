/*
 * engine/cuda.c — the engine's CUDA glue: device count and properties, one stream per GPU worker,
 * stream synchronisation after synchronous GPU functions. Without USE_CUDA every entry
 * reports that no GPU exists, and no CUDA header is needed.
 */
#include "engine/engine_impl.h"

#include <stdio.h>
#include <string.h>

#ifdef MXC_USE_CUDA
#include <cuda_runtime.h>

int mxc_gpu_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

int mxc_gpu_info(int dev, mxc_gpu_info_t *out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_gpu_info: out is NULL");
    memset(out, 0, sizeof *out);
    int n = mxc_gpu_count();
    if (dev < 0 || dev >= n)
        return mxc__error(MXC_ENODEV, "mxc_gpu_info: no gpu(%d) (%d GPU(s) found)", dev, n);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "mxc_gpu_info: cudaGetDeviceProperties(%d): %s", dev,
                          cudaGetErrorString(e));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->total_memory = (uint64_t)p.totalGlobalMem;
    out->major = p.major;
    out->minor = p.minor;
    out->multiprocessors = p.multiProcessorCount;
    return MXC_OK;
}

int mxc__cuda_worker_init(int dev_id, bool copy_stream, void **stream) {
    *stream = NULL;
    cudaError_t e = cudaSetDevice(dev_id);
    cudaStream_t s = NULL;
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "gpu(%d): cannot create a %s stream: %s", dev_id,
                          copy_stream ? "copy" : "compute", cudaGetErrorString(e));
    *stream = s;
    return MXC_OK;
}

void mxc__cuda_worker_fini(void *stream) { cudaStreamDestroy((cudaStream_t)stream); }

int mxc__cuda_stream_sync(void *stream) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    return MXC_OK;
}

#else

int mxc_gpu_count(void) { return 0; }

int mxc_gpu_info(int dev, mxc_gpu_info_t *out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_gpu_info: out is NULL");
    memset(out, 0, sizeof *out);
    return mxc__error(MXC_ENODEV, "mxc_gpu_info: gpu(%d): mxc was built without CUDA (USE_CUDA=1)",
                      dev);
}

int mxc__cuda_worker_init(int dev_id, bool copy_stream, void **stream) {
    *stream = NULL;
    return mxc__error(MXC_ENODEV, "gpu(%d): mxc was built without CUDA (USE_CUDA=1)", dev_id);
}

void mxc__cuda_worker_fini(void *stream) {}

int mxc__cuda_stream_sync(void *stream) { return MXC_OK; }

#endif
