/*
 * ndarray/fill_gpu.cu — mxc_nd_full on a GPU: every element gets the same bit pattern,
 * computed on the host (ndarray/ops.c) so both devices convert the value identically.
 */
extern "C" {
#include "common/common.h"
}

#include <cuda_runtime.h>
#include <stdint.h>

namespace {

template <typename T> __global__ void fill(T *out, int64_t n, T value) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = value;
}

template <typename T> void launch(void *data, int64_t n, uint64_t bits, cudaStream_t s) {
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535)
        blocks = 65535;
    fill<T><<<(unsigned)blocks, threads, 0, s>>>((T *)data, n, (T)bits);
}

} // namespace

extern "C" int mxc__fill_gpu(void *data, int64_t n, int size, uint64_t bits, void *stream) {
    if (n == 0)
        return MXC_OK;
    cudaStream_t s = (cudaStream_t)stream;
    switch (size) {
    case 1: launch<uint8_t>(data, n, bits, s); break;
    case 2: launch<uint16_t>(data, n, bits, s); break;
    case 4: launch<uint32_t>(data, n, bits, s); break;
    default: launch<uint64_t>(data, n, bits, s); break;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "fill of %lld elements: %s", (long long)n,
                          cudaGetErrorString(e));
    return MXC_OK;
}
