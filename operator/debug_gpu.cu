/*
 * operator/debug_gpu.cu — the device half of `_sleep` on a GPU: one thread that keeps the
 * stream busy for a while, read from the GPU's global nanosecond timer (%globaltimer), so
 * that work queued behind it on the stream (the copy of the data) finishes late.
 */
#include "operator/op_gpu.cuh"

static __device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void spin_kernel(uint64_t ns) {
    const uint64_t start = global_ns();
    while (global_ns() - start < ns) {
    }
}

/* Queues a kernel on `stream` that spins for `seconds` (>= 0): MXC_OK or MXC_EDEVICE. */
extern "C" int mxc__spin_gpu(double seconds, void *stream) {
    if (!(seconds > 0))
        return MXC_OK;
    spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((uint64_t)(seconds * 1e9));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "_sleep: spin kernel launch: %s", cudaGetErrorString(e));
    return MXC_OK;
}
