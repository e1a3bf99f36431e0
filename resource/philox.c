/*
 * resource/philox.c — Philox-4x32-10 and the bulk fills built on it (raw words, uniform,
 * normal). The mapping from (seed, stream, position) to each value is specified in
 * philox.h; this file is its CPU implementation, one counter block (4 words) at a time.
 */
#include "resource/philox.h"

#include "common/common.h"

#include <math.h>

#define PHILOX_ROUNDS 10
#define TWO_PI 6.283185307179586476925286766559

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void mxc__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        if (r > 0) { /* Random123 bumps the key before every round but the first */
            k0 += MXC__PHILOX_W0;
            k1 += MXC__PHILOX_W1;
        }
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(MXC__PHILOX_M0, c0, &hi0);
        uint32_t lo1 = mulhilo(MXC__PHILOX_M1, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void mxc__philox_init(struct mxc__philox *g, uint64_t seed, uint64_t stream) {
    g->key[0] = (uint32_t)seed;
    g->key[1] = (uint32_t)(seed >> 32);
    g->stream = stream;
    g->offset = 0;
}

void mxc__philox_skip(struct mxc__philox *g, uint64_t n) { g->offset += n; }

/* The four words of counter block `c`: positions 4c .. 4c+3 of g's stream. */
static inline void philox_block(const struct mxc__philox *g, uint64_t c, uint32_t w[4]) {
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)g->stream,
                       (uint32_t)(g->stream >> 32)};
    mxc__philox4x32_10(ctr, g->key, w);
}

static int check_fill(const char *fn, const struct mxc__philox *g, const void *out,
                      int64_t n) {
    if (g == NULL)
        return mxc__error(MXC_EINVAL, "%s: generator is NULL", fn);
    if (n < 0)
        return mxc__error(MXC_EINVAL, "%s: n = %lld is negative", fn, (long long)n);
    if (out == NULL && n > 0)
        return mxc__error(MXC_EINVAL, "%s: out is NULL for n = %lld", fn, (long long)n);
    return MXC_OK;
}

int mxc__philox_u32(struct mxc__philox *g, uint32_t *out, int64_t n) {
    int rc = check_fill("mxc__philox_u32", g, out, n);
    if (rc != MXC_OK)
        return rc;
    uint64_t pos = g->offset;
    for (int64_t j = 0; j < n;) {
        uint32_t w[4];
        philox_block(g, pos >> 2, w);
        for (unsigned k = (unsigned)(pos & 3); k < 4 && j < n; k++, j++, pos++)
            out[j] = w[k];
    }
    g->offset = pos;
    return MXC_OK;
}

/* The uniform of the mapping. range * u is exact in double (24-bit times 24-bit
 * significands), so contracting the expression into a fused multiply-add, which some
 * compilers and flags do, cannot change the result. */
static inline float to_uniform(uint32_t word, float lo, float range) {
    double u = (double)(word >> 8) * 0x1p-24;
    return (float)((double)lo + (double)range * u);
}

int mxc__philox_uniform(struct mxc__philox *g, float *out, int64_t n, float lo, float hi) {
    int rc = check_fill("mxc__philox_uniform", g, out, n);
    if (rc != MXC_OK)
        return rc;
    float range = hi - lo;
    if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi) || !isfinite(range))
        return mxc__error(MXC_EINVAL,
                          "mxc__philox_uniform: bad range [%g, %g): the bounds must be finite "
                          "with low <= high and high - low finite",
                          (double)lo, (double)hi);
    uint64_t pos = g->offset;
    for (int64_t j = 0; j < n;) {
        uint32_t w[4];
        philox_block(g, pos >> 2, w);
        for (unsigned k = (unsigned)(pos & 3); k < 4 && j < n; k++, j++, pos++)
            out[j] = to_uniform(w[k], lo, range);
    }
    g->offset = pos;
    return MXC_OK;
}

/* Box-Muller on one pair of words: z0 = r cos t, z1 = r sin t. */
static inline void box_muller(uint32_t a, uint32_t b, double *z0, double *z1) {
    double u1 = ((double)a + 1.0) * 0x1p-32; /* (0, 1]: log never sees 0 */
    double u2 = (double)b * 0x1p-32;         /* [0, 1) */
    double r = sqrt(-2.0 * log(u1));
    double t = TWO_PI * u2;
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

int mxc__philox_normal(struct mxc__philox *g, float *out, int64_t n, float mean, float std) {
    int rc = check_fill("mxc__philox_normal", g, out, n);
    if (rc != MXC_OK)
        return rc;
    if (!isfinite(mean) || !isfinite(std) || !(std >= 0.0f))
        return mxc__error(MXC_EINVAL,
                          "mxc__philox_normal: bad parameters mean = %g, std = %g: both must "
                          "be finite and std >= 0",
                          (double)mean, (double)std);
    uint64_t pos = g->offset;
    double z[2] = {0.0, 0.0};
    for (int64_t j = 0; j < n;) {
        uint32_t w[4];
        philox_block(g, pos >> 2, w);
        for (unsigned k = (unsigned)(pos & 3); k < 4 && j < n; k++, j++, pos++) {
            /* A pair (2p, 2p+1) never straddles a block; compute it at its even word, or
             * at its odd word when a fill starts there. */
            if ((k & 1) == 0 || j == 0)
                box_muller(w[k & ~1u], w[k | 1u], &z[0], &z[1]);
            out[j] = (float)((double)mean + (double)std * z[k & 1]);
        }
    }
    g->offset = pos;
    return MXC_OK;
}
