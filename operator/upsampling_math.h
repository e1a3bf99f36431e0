/*
 * operator/upsampling_math.h — nearest UpSampling's indexing, shared by its CPU kernels
 * (operator/upsampling.c) and GPU kernels (operator/upsampling_gpu.cu). Output (N, Co, OH,
 * OW); input k (N, C, H, W) is repeated s = OH / H times along both spatial axes into the
 * output channels off .. off + C - 1 (concat mode; off = 0 for all in sum mode):
 *   out[n, off + c, h, w] (+)= x[n, c, h / s, w / s]
 *   dx[n, c, h, w] = sum of dy[n, off + c, h s + i, w s + j] over i, j < s
 */
#ifndef MXC_OPERATOR_UPSAMPLING_MATH_H
#define MXC_OPERATOR_UPSAMPLING_MATH_H

#include "common/hd.h"

#include <stdint.h>

/* One input's place in the output. */
struct mxc__up_view {
    int64_t c, h, w;         /* the input's channels and spatial size */
    int64_t co, oh, ow, off; /* the output's channels and size, the input's first channel */
    int64_t s;               /* the input's scale */
};

/* Element e of the input's (N, C, OH, OW) part of the output: its index in the output and
 * the index of the input element it repeats. */
static inline MXC__HD void mxc__up_at(int64_t e, const struct mxc__up_view *v, int64_t *out,
                                      int64_t *in) {
    const int64_t w = e % v->ow, h = e / v->ow % v->oh, c = e / (v->ow * v->oh) % v->c;
    const int64_t n = e / (v->ow * v->oh * v->c);
    *out = ((n * v->co + v->off + c) * v->oh + h) * v->ow + w;
    *in = ((n * v->c + c) * v->h + h / v->s) * v->w + w / v->s;
}

/* The gradient of input element e. */
static inline MXC__HD float mxc__up_grad(const float *dy, int64_t e, const struct mxc__up_view *v) {
    const int64_t w = e % v->w, h = e / v->w % v->h, c = e / (v->w * v->h) % v->c;
    const int64_t n = e / (v->w * v->h * v->c);
    const float *p = dy + ((n * v->co + v->off + c) * v->oh + h * v->s) * v->ow + w * v->s;
    float g = 0;
    for (int64_t i = 0; i < v->s; i++)
        for (int64_t j = 0; j < v->s; j++)
            g += p[i * v->ow + j];
    return g;
}

#endif /* MXC_OPERATOR_UPSAMPLING_MATH_H */
