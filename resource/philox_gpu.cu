/*
 * resource/philox_gpu.cu — the Philox fills on a GPU: one thread per value computes its
 * counter block and maps its word exactly as the CPU fills do (philox_math.h holds the
 * shared arithmetic), so a seed gives the same values on either device.
 */
extern "C" {
#include "common/common.h"
#include "resource/philox_math.h"
}

#include <cuda_runtime.h>

namespace {

__global__ void philox_fill(uint32_t k0, uint32_t k1, uint64_t stream, uint64_t offset, float *out,
                            int64_t n, bool normal, float a, float b) {
    const uint32_t key[2] = {k0, k1};
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        uint64_t pos = offset + (uint64_t)j;
        unsigned k = (unsigned)(pos & 3);
        uint32_t w[4];
        mxc__philox_block(key, stream, pos >> 2, w);
        if (!normal) {
            out[j] = mxc__philox_to_uniform(w[k], a, b - a);
        } else {
            double z[2];
            mxc__philox_box_muller(w[k & ~1u], w[k | 1u], &z[0], &z[1]);
            out[j] = (float)((double)a + (double)b * z[k & 1]);
        }
    }
}

} // namespace

extern "C" int mxc__philox_launch_gpu(const struct mxc__philox *g, float *out, int64_t n,
                                      bool normal, float a, float b, void *stream) {
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535)
        blocks = 65535;
    philox_fill<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
        g->key[0], g->key[1], g->stream, g->offset, out, n, normal, a, b);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "random fill of %lld values: %s", (long long)n,
                          cudaGetErrorString(e));
    return MXC_OK;
}
