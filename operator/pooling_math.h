/*
 * operator/pooling_math.h — Pooling's window arithmetic, one copy for the CPU kernels
 * (operator/pooling.c) and the CUDA kernels (operator/pooling_gpu.cu): the geometry of a
 * problem, the window of an output, its value, and the input a max output came from.
 */
#ifndef MXC_OPERATOR_POOLING_MATH_H
#define MXC_OPERATOR_POOLING_MATH_H

#include "common/hd.h"
#include "operator/op.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>

enum { POOL_MAX, POOL_AVG, POOL_SUM, POOL_LP };

/* One problem: planes of (ih, iw) pooled by (kh, kw) windows into (oh, ow). */
struct pgeom {
    int64_t planes, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
};

/* The window of output (y, x): rows [h0, h1), columns [w0, w1) clipped to the input,
 * and the divisor of avg (the unclipped window within the padded input, or the clipped
 * one without count_include_pad). */
struct pool_window {
    int64_t h0, h1, w0, w1;
    float divisor;
};

/* The window of output index i along an axis of `in` input positions padded by `pad`
 * (stride s, size k): [*lo, *hi) in padded coordinates minus pad, clipped to the padded
 * input's end. A window past that end (the full convention with a stride beyond the input)
 * is empty there; clipping first keeps the arithmetic inside int64 for any stride (i * s
 * is formed only when it is at most in + 2 pad, which the geometry checked). */
static inline MXC__HD void pool_span(int64_t i, int64_t s, int64_t k, int64_t in, int64_t pad,
                                     int64_t *lo, int64_t *hi) {
    int64_t end = in + pad;
    if (i > 0 && s > (end + pad) / i) /* i * s - pad > end */
        *lo = end;
    else
        *lo = i * s - pad < end ? i * s - pad : end;
    *hi = k < end - *lo ? *lo + k : end;
}

static inline MXC__HD struct pool_window pool_window_at(const struct pgeom *g, bool incl, int64_t y,
                                                        int64_t x) {
    int64_t hs, he, ws, we;
    pool_span(y, g->sh, g->kh, g->ih, g->ph, &hs, &he);
    pool_span(x, g->sw, g->kw, g->iw, g->pw, &ws, &we);
    struct pool_window w;
    w.h0 = hs > 0 ? hs : 0;
    w.w0 = ws > 0 ? ws : 0;
    w.h1 = he < g->ih ? he : g->ih;
    w.w1 = we < g->iw ? we : g->iw;
    if (w.h1 < w.h0)
        w.h1 = w.h0;
    if (w.w1 < w.w0)
        w.w1 = w.w0;
    double count = incl ? (double)(he - hs) * (double)(we - ws)
                        : (double)(w.h1 - w.h0) * (double)(w.w1 - w.w0);
    w.divisor = count > 0 ? (float)count : 1.0f;
    return w;
}

/* The output of window w over plane x (rows of iw): its maximum (-FLT_MAX when empty),
 * mean or sum as `type` says. */
static inline MXC__HD float pool_value(const float *x, int64_t iw, struct pool_window w, int type) {
    float v = type == POOL_MAX ? -FLT_MAX : 0.0f;
    for (int64_t i = w.h0; i < w.h1; i++)
        for (int64_t k = w.w0; k < w.w1; k++) {
            float e = x[i * iw + k];
            v = type != POOL_MAX ? v + e : e > v ? e : v;
        }
    return type == POOL_AVG ? v / w.divisor : v;
}

/* Where max output m of window w over plane x came from: the index (i * iw + k) of the
 * first input in scan order equal to m, -1 when none is. */
static inline MXC__HD int64_t pool_first_max(const float *x, int64_t iw, struct pool_window w,
                                             float m) {
    for (int64_t i = w.h0; i < w.h1; i++)
        for (int64_t k = w.w0; k < w.w1; k++)
            if (x[i * iw + k] == m)
                return i * iw + k;
    return -1;
}

/* The CUDA kernels (operator/pooling_gpu.cu, CUDA builds only; declared in every build,
 * as nvcc does not get MXC_USE_CUDA): y (req) = the pooled x; dx (req) = the
 * gradient from dy (max: to the first input equal to y in each window), one thread per
 * output (forward) or per input gathering from the windows that hold it (backward). */
int mxc__pool_forward_gpu(const struct pgeom *g, int type, bool incl, const float *x, float *y,
                          int req, void *stream);
int mxc__pool_backward_gpu(const struct pgeom *g, int type, bool incl, const float *x,
                           const float *y, const float *dy, float *dx, int req, void *stream);

#endif /* MXC_OPERATOR_POOLING_MATH_H */
