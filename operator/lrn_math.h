/*
 * operator/lrn_math.h — LRN's arithmetic, shared by its CPU kernels (operator/lrn.c) and
 * GPU kernels (operator/lrn_gpu.cu). Data is (N, C, H, W), row-major, seen as (N, C, inner)
 * with inner = H * W; channel c's window is channels c - nsize / 2 .. c + nsize / 2 that
 * exist (nsize odd), and for x at (n, c, i), as MXNet 1.9.1 computes it:
 *   norm = knorm + alpha / nsize * sum over the window of x²     (the hidden tmp_norm)
 *   out  = x * norm^-beta
 *   dx   = dy * norm^-beta - 2 beta alpha / nsize * x * sum over the window of
 *          dy' x' norm'^(-beta - 1)
 * (the window is symmetric: c' is in c's window exactly when c is in c''s).
 */
#ifndef MXC_OPERATOR_LRN_MATH_H
#define MXC_OPERATOR_LRN_MATH_H

#include "common/hd.h"

#include <math.h>
#include <stdint.h>

struct lrn_param {
    float alpha, beta, knorm;
    int nsize;
};

/* The view of one element: `at` is (n, c, i)'s index, c its channel. */
struct mxc__lrn_view {
    int64_t channels, inner;
    int64_t half; /* nsize / 2 */
};

/* norm at element `at` of channel c: knorm + alpha / nsize * sum of x² over the window */
static inline MXC__HD float mxc__lrn_norm(const float *x, int64_t at, int64_t c,
                                          struct mxc__lrn_view v, const struct lrn_param *p) {
    const int64_t lo = c < v.half ? 0 : c - v.half;
    const int64_t hi = c + v.half < v.channels - 1 ? c + v.half : v.channels - 1;
    float s = 0;
    for (int64_t k = lo; k <= hi; k++) {
        const float e = x[at + (k - c) * v.inner];
        s += e * e;
    }
    return s * (p->alpha / (float)p->nsize) + p->knorm;
}

/* dx at element `at` of channel c, from x, dy and the forward's norm */
static inline MXC__HD float mxc__lrn_dx(const float *x, const float *dy, const float *norm,
                                        int64_t at, int64_t c, struct mxc__lrn_view v,
                                        const struct lrn_param *p) {
    const int64_t lo = c < v.half ? 0 : c - v.half;
    const int64_t hi = c + v.half < v.channels - 1 ? c + v.half : v.channels - 1;
    float s = 0;
    for (int64_t k = lo; k <= hi; k++) {
        const int64_t e = at + (k - c) * v.inner;
        s += dy[e] * x[e] * powf(norm[e], -p->beta - 1.0f);
    }
    const float salpha = p->alpha / (float)p->nsize;
    return dy[at] * powf(norm[at], -p->beta) - 2.0f * p->beta * salpha * s * x[at];
}

#endif /* MXC_OPERATOR_LRN_MATH_H */
