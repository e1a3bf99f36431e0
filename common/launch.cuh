/*
 * common/launch.cuh — for .cu files only: launching an element-wise map on a stream.
 * A kernel written with it is one device lambda applied to every index in [0, n), run by
 * a grid-stride loop, so the .cu files hold indexing and launch, never a second copy of
 * the arithmetic (which lives in MXC__HD functions, common/hd.h):
 *
 *     return mxc__launch(n, stream, "relu", [=] __device__(int64_t i) { y[i] = f(x[i]); });
 *
 * (nvcc's --extended-lambda, set by the Makefile, allows __device__ lambdas.)
 */
#ifndef MXC_COMMON_LAUNCH_CUH
#define MXC_COMMON_LAUNCH_CUH

extern "C" {
#include "common/common.h"
}

#include <cuda_runtime.h>
#include <stdint.h>

#define MXC__CUDA_THREADS 256

/* Blocks for n elements, capped: a grid-stride loop covers the rest. */
static inline unsigned mxc__cuda_blocks(int64_t n) {
    int64_t b = (n + MXC__CUDA_THREADS - 1) / MXC__CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

template <typename F> __global__ void mxc__map_kernel(int64_t n, F f) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        f(i);
}

/* Runs f(i) for every i in [0, n) on `stream`; MXC_OK, or MXC_EDEVICE naming `what` when
 * the launch fails. Nothing is launched for n == 0. */
template <typename F> int mxc__launch(int64_t n, void *stream, const char *what, F f) {
    if (n <= 0)
        return MXC_OK;
    mxc__map_kernel<<<mxc__cuda_blocks(n), MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, f);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "%s on %lld elements: %s", what, (long long)n,
                          cudaGetErrorString(e));
    return MXC_OK;
}

#endif /* MXC_COMMON_LAUNCH_CUH */
