/*
 * operator/channel_sum.cuh — for .cu files: per-channel work on a GPU, one thread block
 * per channel of data seen as (outer, C, inner), row-major, and the block-wide sum such
 * work needs (BatchNorm's statistics, prelu's gamma gradient, FullyConnected's bias
 * gradient as the channels of (m, n, 1)). Sums are in double, as the CPU kernels' are.
 */
#ifndef MXC_OPERATOR_CHANNEL_SUM_CUH
#define MXC_OPERATOR_CHANNEL_SUM_CUH

#include "common/launch.cuh"

/* The sum of every thread's v in the block, returned to every thread. All threads of the
 * block must call it (it synchronises them); blockDim.x is MXC__CUDA_THREADS. */
static __device__ double mxc__block_sum(double v) {
    __shared__ double part[MXC__CUDA_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0)
            part[0] = v;
    }
    __syncthreads();
    const double sum = part[0];
    __syncthreads(); /* part may be reused by the next call */
    return sum;
}

/* The index in (outer, C, inner) of the j-th of channel k's outer * inner elements. */
static __device__ __forceinline__ int64_t mxc__channel_at(int64_t j, int64_t ch, int64_t inner,
                                                          int64_t k) {
    const int64_t o = j / inner;
    return (o * ch + k) * inner + (j - o * inner);
}

template <typename F> __global__ void mxc__channel_kernel(int64_t ch, F f) {
    for (int64_t k = blockIdx.x; k < ch; k += gridDim.x) /* the same trips for a whole block */
        f(k);
}

/* Runs f(k) for every channel k in [0, ch) on `stream`, one block of MXC__CUDA_THREADS
 * threads per channel: inside f, the block's threads share channel k's elements (j from
 * threadIdx.x in steps of blockDim.x, at mxc__channel_at) and may call mxc__block_sum.
 * MXC_OK, or MXC_EDEVICE naming `what` when the launch fails; nothing for ch == 0. */
template <typename F> int mxc__per_channel(int64_t ch, void *stream, const char *what, F f) {
    if (ch <= 0)
        return MXC_OK;
    const unsigned blocks = (unsigned)(ch < 65535 ? ch : 65535);
    mxc__channel_kernel<<<blocks, MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(ch, f);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "%s on %lld channels: %s", what, (long long)ch,
                          cudaGetErrorString(e));
    return MXC_OK;
}

#endif /* MXC_OPERATOR_CHANNEL_SUM_CUH */
