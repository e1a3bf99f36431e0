/*
 * storage/storage_cuda.c — the device backend of storage.c: GPU memory from cudaMalloc,
 * pinned host memory from cudaHostAlloc, and the device-count check. Built without
 * USE_CUDA it only reports MXC_ENODEV, and no CUDA header is needed.
 */
#include "storage/storage_impl.h"

#ifdef MXC_USE_CUDA
#include <cuda_runtime.h>

#include <stdatomic.h>

/* The number of CUDA devices, asked once: it does not change while a process runs. */
static int device_count(void) {
    static atomic_int cached = -1;
    int n = atomic_load(&cached);
    if (n >= 0)
        return n;
    n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the "no device" error */
        n = 0;
    }
    atomic_store(&cached, n);
    return n;
}

int mxc__storage_device_check(const char *fn, mxc_context ctx) {
    char name[48];
    int n = device_count();
    if (n == 0)
        return mxc__error(MXC_ENODEV, "%s: no device %s: this machine has no usable CUDA GPU", fn,
                          mxc__ctx_name(ctx, name, sizeof name));
    if (ctx.dev_id >= n)
        return mxc__error(MXC_ENODEV, "%s: no device %s: %d GPU%s usable", fn,
                          mxc__ctx_name(ctx, name, sizeof name), n, n == 1 ? " is" : "s are");
    return MXC_OK;
}

int mxc__storage_device_alloc(mxc_context ctx, size_t size, void **out) {
    *out = NULL;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        cudaGetLastError();
        prev = -1;
    }
    const char *what = "cudaSetDevice";
    void *p = NULL;
    cudaError_t e = cudaSetDevice(ctx.dev_id);
    if (e == cudaSuccess) {
        if (ctx.dev_type == MXC_GPU) {
            what = "cudaMalloc";
            e = cudaMalloc(&p, size);
        } else {
            what = "cudaHostAlloc";
            e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
        }
    }
    if (prev >= 0 && prev != ctx.dev_id)
        cudaSetDevice(prev);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* allocation errors are not sticky; clear them */
        return mxc__error(e == cudaErrorMemoryAllocation ? MXC_ENOMEM : MXC_EDEVICE, "%s: %s", what,
                          cudaGetErrorString(e));
    }
    *out = p;
    return MXC_OK;
}

void mxc__storage_device_free(mxc_context ctx, void *ptr) {
    cudaError_t e = ctx.dev_type == MXC_GPU ? cudaFree(ptr) : cudaFreeHost(ptr);
    if (e != cudaSuccess) {
        char name[48];
        mxc__log(MXC_LOG_ERROR, "storage: freeing %p on %s failed: %s", ptr,
                 mxc__ctx_name(ctx, name, sizeof name), cudaGetErrorString(e));
        cudaGetLastError();
    }
}

#else

int mxc__storage_device_check(const char *fn, mxc_context ctx) {
    char name[48];
    return mxc__error(MXC_ENODEV, "%s: no device %s: mxc was built without CUDA (USE_CUDA=1)", fn,
                      mxc__ctx_name(ctx, name, sizeof name));
}

int mxc__storage_device_alloc(mxc_context ctx, size_t size, void **out) {
    *out = NULL;
    return mxc__error(MXC_ENODEV, "mxc was built without CUDA (USE_CUDA=1)");
}

void mxc__storage_device_free(mxc_context ctx, void *ptr) {}

#endif
