/*
 * storage/storage_impl.h — what storage.c (pools, size classes, statistics) needs from the
 * device backend in storage_cuda.c (cudaMalloc, cudaHostAlloc), and the hook through which
 * a layer above gives back the blocks it keeps for itself at mxc_storage_shutdown. Without
 * USE_CUDA the backend reports MXC_ENODEV, and no CUDA header is needed. Internal.
 */
#ifndef MXC_STORAGE_IMPL_H
#define MXC_STORAGE_IMPL_H

#include "common/common.h"
#include "mxc/storage.h"

/* Checks that the GPU or pinned context `ctx` (dev_id >= 0) names a usable device.
 * Returns MXC_OK, or MXC_ENODEV with a message starting with `fn`. */
int mxc__storage_device_check(const char *fn, mxc_context ctx);

/* Allocates `size` bytes of GPU memory (MXC_GPU) or pinned host memory (MXC_CPU_PINNED)
 * on the checked context `ctx`, keeping the calling thread's current device. Returns
 * MXC_OK, or MXC_ENOMEM / MXC_EDEVICE with CUDA's message as the last error. */
int mxc__storage_device_alloc(mxc_context ctx, size_t size, void **out);

/* Releases memory from mxc__storage_device_alloc; a CUDA failure is logged. */
void mxc__storage_device_free(mxc_context ctx, void *ptr);

/* Makes mxc_storage_shutdown call `release` first, before it trims the pools and counts the
 * blocks in use: the resource layer frees its temp space there, which belongs to no user
 * object, so that a shutdown after every user object is freed finds nothing in use. One
 * hook (the resource layer's); setting it again replaces it. Thread-safe. */
void mxc__storage_set_shutdown_hook(void (*release)(void));

#endif /* MXC_STORAGE_IMPL_H */
