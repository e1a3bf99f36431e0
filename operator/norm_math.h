/*
 * operator/norm_math.h — what LayerNorm, InstanceNorm, GroupNorm and L2Normalization
 * (operator/layer_norm.c) share with their GPU kernels (operator/layer_norm_gpu.cu): the
 * first three normalise "rows" of data to zero mean and unit variance and apply a
 * per-channel gamma and beta; they differ
 * only in which elements form a row and which gamma an element takes, so one descriptor
 * says both and one set of MXC__HD functions does the arithmetic:
 *
 *   LayerNorm(axis):  data (outer, C, inner); row (o, i) is the C elements along axis,
 *                     `inner` apart; element j takes gamma[j]
 *   InstanceNorm:     data (N, C, S...); row (n, c) is its S contiguous elements; gamma[c]
 *   GroupNorm(G):     data (N, C, S...); row (n, g) is the C / G * S contiguous elements of
 *                     group g; gamma[g] (MXNet 1.9.1's gamma has one value per group)
 *
 * Row r's j-th element is at (r / inner) * m * inner + r % inner + j * inner, and takes
 * gamma[((r % groups) * m + j) / span]. So gamma index c covers rows c * span / m + t *
 * groups (t < rows / groups) and, in each, the span elements from (c * span) % m: that is
 * how the per-channel gradients are gathered. The statistics are in double, as BatchNorm's.
 */
#ifndef MXC_OPERATOR_NORM_MATH_H
#define MXC_OPERATOR_NORM_MATH_H

#include "common/hd.h"
#include "operator/batch_norm_math.h"

#include <stdint.h>

struct mxc__norm_rows {
    int64_t rows;     /* rows normalised, each with its own mean and std */
    int64_t m;        /* elements per row */
    int64_t inner;    /* distance between a row's elements */
    int64_t groups;   /* gamma index of (r, j): ((r % groups) * m + j) / span */
    int64_t span;     /* consecutive elements of a row sharing one gamma */
    int64_t channels; /* gamma's and beta's length */
};

/* The index in data of row r's j-th element. */
static inline MXC__HD int64_t mxc__norm_at(const struct mxc__norm_rows *d, int64_t r, int64_t j) {
    return (r / d->inner) * d->m * d->inner + r % d->inner + j * d->inner;
}

/* The gamma (and beta) index of row r's j-th element. */
static inline MXC__HD int64_t mxc__norm_gamma_at(const struct mxc__norm_rows *d, int64_t r,
                                                 int64_t j) {
    return ((r % d->groups) * d->m + j) / d->span;
}

/* How many elements take gamma[c] (the same for every c). */
static inline MXC__HD int64_t mxc__norm_channel_count(const struct mxc__norm_rows *d) {
    return d->rows / d->groups * d->span;
}

/* The t-th element taking gamma[c] (t < mxc__norm_channel_count): its row and position. */
static inline MXC__HD void mxc__norm_channel_elem(const struct mxc__norm_rows *d, int64_t c,
                                                  int64_t t, int64_t *r, int64_t *j) {
    *r = c * d->span / d->m + t / d->span * d->groups;
    *j = c * d->span % d->m + t % d->span;
}

/* A row's std from its sum of squared deviations: sqrt(ss / m + eps) (MXNet's LayerNorm
 * and GroupNorm output this as `std`); its inverse is what the kernels multiply by. */
static inline MXC__HD float mxc__norm_std(double ss, int64_t m, double eps) {
    return (float)sqrt((m ? ss / (double)m : 0.0) + eps);
}

/* out = (x - mean) / std * gamma + beta */
static inline MXC__HD float mxc__norm_out(float x, float mean, float rstd, float gamma,
                                          float beta) {
    return (x - mean) * rstd * gamma + beta;
}

/* dx of one row element, with g = dy * gamma, xhat = (x - mean) / std and the row's
 * gmean = sum(g) / m and gxmean = sum(g * xhat) / m: (g - gmean - xhat * gxmean) / std */
static inline MXC__HD float mxc__norm_dx(float g, float xhat, float gmean, float gxmean,
                                         float rstd) {
    return (g - gmean - xhat * gxmean) * rstd;
}

/* L2Normalization's rows (instance, channel or spatial) use the same view, with no gamma:
 * y = x / norm, norm = sqrt(sum x² + eps); dx = (g - s * y) / norm with s = sum(g * y). */
static inline MXC__HD float mxc__l2_norm(double ss, double eps) { return (float)sqrt(ss + eps); }

static inline MXC__HD float mxc__l2_dx(float g, float y, float s, float norm) {
    return (g - s * y) / norm;
}

#endif /* MXC_OPERATOR_NORM_MATH_H */
