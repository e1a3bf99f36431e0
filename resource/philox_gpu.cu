/*
 * resource/philox_gpu.cu — the Philox fills on a GPU: one thread per value computes its
 * counter block and maps its word exactly as the CPU fills do (philox_math.h holds the
 * shared arithmetic), so a seed gives the same values on either device.
 */
#include "common/launch.cuh"

extern "C" {
#include "resource/philox_math.h"
}

extern "C" int mxc__philox_launch_gpu(const struct mxc__philox *g, float *out, int64_t n,
                                      bool normal, float a, float b, void *stream) {
    const uint32_t k0 = g->key[0], k1 = g->key[1];
    const uint64_t stream_id = g->stream, offset = g->offset;
    return mxc__launch(n, stream, "random fill", [=] __device__(int64_t j) {
        const uint32_t key[2] = {k0, k1};
        uint64_t pos = offset + (uint64_t)j;
        unsigned k = (unsigned)(pos & 3);
        uint32_t w[4];
        mxc__philox_block(key, stream_id, pos >> 2, w);
        if (!normal) {
            out[j] = mxc__philox_to_uniform(w[k], a, b - a);
        } else {
            double z[2];
            mxc__philox_box_muller(w[k & ~1u], w[k | 1u], &z[0], &z[1]);
            out[j] = (float)((double)a + (double)b * z[k & 1]);
        }
    });
}
