/*
 * resource/philox.c — Philox-4x32-10 and the bulk fills built on it (raw words, uniform,
 * normal). The mapping from (seed, stream, position) to each value is specified in
 * philox.h; this file is its CPU implementation, one counter block (4 words) at a time.
 */
#include "resource/philox_math.h"

#include "common/common.h"

void mxc__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint64_t c = (uint64_t)ctr[0] | (uint64_t)ctr[1] << 32;
    uint64_t stream = (uint64_t)ctr[2] | (uint64_t)ctr[3] << 32;
    mxc__philox_block(key, stream, c, out);
}

void mxc__philox_init(struct mxc__philox *g, uint64_t seed, uint64_t stream) {
    g->key[0] = (uint32_t)seed;
    g->key[1] = (uint32_t)(seed >> 32);
    g->stream = stream;
    g->offset = 0;
}

void mxc__philox_skip(struct mxc__philox *g, uint64_t n) { g->offset += n; }

static inline void philox_block(const struct mxc__philox *g, uint64_t c, uint32_t w[4]) {
    mxc__philox_block(g->key, g->stream, c, w);
}

static int check_fill(const char *fn, const struct mxc__philox *g, const void *out, int64_t n) {
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

/* The rules of the uniform and normal fills, the same on every device. */
static int check_dist(const char *fn, const struct mxc__philox *g, const float *out, int64_t n,
                      bool normal, float a, float b) {
    int rc = check_fill(fn, g, out, n);
    if (rc != MXC_OK)
        return rc;
    if (!normal && (!isfinite(a) || !isfinite(b) || !(a <= b) || !isfinite(b - a)))
        return mxc__error(MXC_EINVAL,
                          "%s: bad range [%g, %g): the bounds must be finite with low <= high "
                          "and high - low finite",
                          fn, (double)a, (double)b);
    if (normal && (!isfinite(a) || !isfinite(b) || !(b >= 0.0f)))
        return mxc__error(MXC_EINVAL,
                          "%s: bad parameters mean = %g, std = %g: both must be finite and "
                          "std >= 0",
                          fn, (double)a, (double)b);
    return MXC_OK;
}

int mxc__philox_uniform(struct mxc__philox *g, float *out, int64_t n, float lo, float hi) {
    int rc = check_dist("mxc__philox_uniform", g, out, n, false, lo, hi);
    if (rc != MXC_OK)
        return rc;
    float range = hi - lo;
    uint64_t pos = g->offset;
    for (int64_t j = 0; j < n;) {
        uint32_t w[4];
        philox_block(g, pos >> 2, w);
        for (unsigned k = (unsigned)(pos & 3); k < 4 && j < n; k++, j++, pos++)
            out[j] = mxc__philox_to_uniform(w[k], lo, range);
    }
    g->offset = pos;
    return MXC_OK;
}

int mxc__philox_normal(struct mxc__philox *g, float *out, int64_t n, float mean, float std) {
    int rc = check_dist("mxc__philox_normal", g, out, n, true, mean, std);
    if (rc != MXC_OK)
        return rc;
    uint64_t pos = g->offset;
    double z[2] = {0.0, 0.0};
    for (int64_t j = 0; j < n;) {
        uint32_t w[4];
        philox_block(g, pos >> 2, w);
        for (unsigned k = (unsigned)(pos & 3); k < 4 && j < n; k++, j++, pos++) {
            /* A pair (2p, 2p+1) never straddles a block; compute it at its even word, or
             * at its odd word when a fill starts there. */
            if ((k & 1) == 0 || j == 0)
                mxc__philox_box_muller(w[k & ~1u], w[k | 1u], &z[0], &z[1]);
            out[j] = (float)((double)mean + (double)std * z[k & 1]);
        }
    }
    g->offset = pos;
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__philox_fill_gpu(struct mxc__philox *g, float *out, int64_t n, bool normal, float a,
                         float b, void *stream) {
    int rc = check_dist("mxc__philox_fill_gpu", g, out, n, normal, a, b);
    if (rc != MXC_OK || n == 0)
        return rc;
    rc = mxc__philox_launch_gpu(g, out, n, normal, a, b, stream);
    if (rc != MXC_OK)
        return rc;
    g->offset += (uint64_t)n;
    return MXC_OK;
}
#endif
