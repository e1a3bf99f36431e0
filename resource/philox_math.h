/*
 * resource/philox_math.h — the per-word arithmetic of the Philox stream (the bijection,
 * the uniform and Box-Muller mappings specified in philox.h), written once for the CPU
 * fills (philox.c) and the GPU kernels (philox_gpu.cu), so that both devices compute the
 * same function. Internal; included by those two files only.
 */
#ifndef MXC_PHILOX_MATH_H
#define MXC_PHILOX_MATH_H

#include "common/hd.h"
#include "resource/philox.h"

#include <math.h>
#include <stdint.h>

#define MXC__PHILOX_ROUNDS 10
#define MXC__TWO_PI        6.283185307179586476925286766559

static inline MXC__HD uint32_t mxc__mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* The four words of counter block `c` of `stream` under `key`: positions 4c .. 4c+3. */
static inline MXC__HD void mxc__philox_block(const uint32_t key[2], uint64_t stream, uint64_t c,
                                             uint32_t w[4]) {
    uint32_t c0 = (uint32_t)c, c1 = (uint32_t)(c >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < MXC__PHILOX_ROUNDS; r++) {
        if (r > 0) { /* Random123 bumps the key before every round but the first */
            k0 += MXC__PHILOX_W0;
            k1 += MXC__PHILOX_W1;
        }
        uint32_t hi0, hi1;
        uint32_t lo0 = mxc__mulhilo(MXC__PHILOX_M0, c0, &hi0);
        uint32_t lo1 = mxc__mulhilo(MXC__PHILOX_M1, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}

/* The uniform of the mapping. range * u is exact in double (24-bit times 24-bit
 * significands), so contracting the expression into a fused multiply-add, which some
 * compilers and flags do, cannot change the result. */
static inline MXC__HD float mxc__philox_to_uniform(uint32_t word, float lo, float range) {
    double u = (double)(word >> 8) * 0x1p-24;
    return (float)((double)lo + (double)range * u);
}

/* Box-Muller on one pair of words: z0 = r cos t, z1 = r sin t. */
static inline MXC__HD void mxc__philox_box_muller(uint32_t a, uint32_t b, double *z0, double *z1) {
    double u1 = ((double)a + 1.0) * 0x1p-32; /* (0, 1]: log never sees 0 */
    double u2 = (double)b * 0x1p-32;         /* [0, 1) */
    double r = sqrt(-2.0 * log(u1));
    double t = MXC__TWO_PI * u2;
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

#endif /* MXC_PHILOX_MATH_H */
