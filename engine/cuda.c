/*
 * engine/cuda.c — the engine's CUDA glue: device count, one stream per GPU worker,
 * stream synchronisation after synchronous GPU functions. Without USE_CUDA every entry
 * reports that no GPU exists, and no CUDA header is needed.
 */
#include "engine/engine_impl.h"

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

int mxc__cuda_worker_init(int dev_id, bool copy_stream, void **stream) {
    *stream = NULL;
    return mxc__error(MXC_ENODEV, "gpu(%d): mxc was built without CUDA (USE_CUDA=1)", dev_id);
}

void mxc__cuda_worker_fini(void *stream) {}

int mxc__cuda_stream_sync(void *stream) { return MXC_OK; }

#endif
