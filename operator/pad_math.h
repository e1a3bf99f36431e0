/*
 * operator/pad_math.h — Pad's indexing, shared by its CPU kernels (operator/pad.c) and GPU
 * kernels (operator/pad_gpu.cu). Data (N, C, [D,] H, W) is seen as planes = N * C of
 * (D, H, W), a 4-D input with D = 1 unpadded; each of the three axes has its own padding
 * before and after. An output coordinate o of an axis of input size n with `b` before maps
 * to the input coordinate
 *   constant: o - b, or none outside [0, n)  (the output is then constant_value)
 *   edge:     o - b clamped to [0, n - 1]
 *   reflect:  o - b mirrored about 0 and n - 1 without repeating the edge (pads < n)
 * The backward gathers instead of scattering (no atomics on a GPU): input coordinate i of an
 * axis receives the output coordinates of at most three ranges (itself; for edge the
 * padding on its side if it is an edge; for reflect its mirror images).
 */
#ifndef MXC_OPERATOR_PAD_MATH_H
#define MXC_OPERATOR_PAD_MATH_H

#include "common/hd.h"

#include <stdint.h>

enum { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT };

struct mxc__pad_view {
    int64_t planes;
    int64_t in[3], out[3], before[3];
    int mode;
    float value;
};

/* The input coordinate of output coordinate o on an axis, or -1 (constant padding). */
static inline MXC__HD int64_t mxc__pad_src(int64_t o, int64_t n, int64_t b, int mode) {
    int64_t i = o - b;
    if (i >= 0 && i < n)
        return i;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return i < 0 ? 0 : n - 1;
    return i < 0 ? -i : 2 * (n - 1) - i;
}

/* The output coordinates [lo[k], hi[k]) whose source on an axis (input size n, b before,
 * output size out) is input coordinate i; returns how many ranges (1 to 3). */
static inline MXC__HD int mxc__pad_ranges(int64_t i, int64_t n, int64_t b, int64_t out, int mode,
                                          int64_t *lo, int64_t *hi) {
    int k = 0;
    lo[k] = i + b, hi[k++] = i + b + 1;
    if (mode == PAD_EDGE) {
        if (i == 0)
            lo[k] = 0, hi[k++] = b;
        if (i == n - 1)
            lo[k] = n + b, hi[k++] = out;
    } else if (mode == PAD_REFLECT) {
        if (i >= 1 && i <= b) /* o - b = -i */
            lo[k] = b - i, hi[k++] = b - i + 1;
        const int64_t o = b + 2 * (n - 1) - i; /* o - b = 2 (n - 1) - i */
        if (o - b >= n && o < out)
            lo[k] = o, hi[k++] = o + 1;
    }
    return k;
}

/* Forward: output element e. */
static inline MXC__HD float mxc__pad_value(const float *x, int64_t e,
                                           const struct mxc__pad_view *v) {
    const int64_t w = e % v->out[2], h = e / v->out[2] % v->out[1];
    const int64_t d = e / (v->out[2] * v->out[1]) % v->out[0];
    const int64_t p = e / (v->out[2] * v->out[1] * v->out[0]);
    const int64_t sd = mxc__pad_src(d, v->in[0], v->before[0], v->mode);
    const int64_t sh = mxc__pad_src(h, v->in[1], v->before[1], v->mode);
    const int64_t sw = mxc__pad_src(w, v->in[2], v->before[2], v->mode);
    if (sd < 0 || sh < 0 || sw < 0)
        return v->value;
    return x[((p * v->in[0] + sd) * v->in[1] + sh) * v->in[2] + sw];
}

/* Backward: the gradient of input element e, the sum of dy over every output it fed. */
static inline MXC__HD float mxc__pad_grad(const float *dy, int64_t e,
                                          const struct mxc__pad_view *v) {
    const int64_t w = e % v->in[2], h = e / v->in[2] % v->in[1];
    const int64_t d = e / (v->in[2] * v->in[1]) % v->in[0];
    const int64_t p = e / (v->in[2] * v->in[1] * v->in[0]);
    int64_t dl[3], dh[3], hl[3], hh[3], wl[3], wh[3];
    const int nd = mxc__pad_ranges(d, v->in[0], v->before[0], v->out[0], v->mode, dl, dh);
    const int nh = mxc__pad_ranges(h, v->in[1], v->before[1], v->out[1], v->mode, hl, hh);
    const int nw = mxc__pad_ranges(w, v->in[2], v->before[2], v->out[2], v->mode, wl, wh);
    const float *plane = dy + p * v->out[0] * v->out[1] * v->out[2];
    float s = 0;
    for (int a = 0; a < nd; a++)
        for (int64_t od = dl[a]; od < dh[a]; od++)
            for (int b = 0; b < nh; b++)
                for (int64_t oh = hl[b]; oh < hh[b]; oh++)
                    for (int c = 0; c < nw; c++)
                        for (int64_t ow = wl[c]; ow < wh[c]; ow++)
                            s += plane[(od * v->out[1] + oh) * v->out[2] + ow];
    return s;
}

#endif /* MXC_OPERATOR_PAD_MATH_H */
