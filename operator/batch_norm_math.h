/*
 * operator/batch_norm_math.h — what BatchNorm's CPU kernels (operator/batch_norm.c) and
 * GPU kernels (operator/batch_norm_gpu.cu) share: the parameters, data's layout as
 * (outer, C, inner), and the per-channel and per-element arithmetic as MXC__HD functions.
 */
#ifndef MXC_OPERATOR_BATCH_NORM_MATH_H
#define MXC_OPERATOR_BATCH_NORM_MATH_H

#include "common/hd.h"
#include "operator/op.h"

#include <math.h>

struct bn_param {
    double eps;
    float momentum;
    bool fix_gamma;
    bool use_global_stats;
    bool output_mean_var;
    int axis;
    bool cudnn_off;
};

/* The channel axis of an ndim-D data, or -1 if `axis` is out of range. */
static inline int bn_axis(const struct bn_param *p, int ndim) {
    int a = p->axis < 0 ? p->axis + ndim : p->axis;
    return a >= 0 && a < ndim ? a : -1;
}

/* A shape seen as (outer, C, inner) around axis `a` (0 <= a < ndim): also LayerNorm's
 * and LRN's view of their data (operator/norm_math.h). */
static inline void mxc__axis_split(const mxc_shape *s, int a, int64_t *outer, int64_t *ch,
                                   int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < a; d++)
        *outer *= s->dims[d];
    *ch = s->dims[a];
    for (int d = a + 1; d < s->ndim; d++)
        *inner *= s->dims[d];
}

/* data seen as (outer, C, inner) */
static inline void bn_dims(const struct bn_param *p, const mxc_shape *s, int64_t *outer,
                           int64_t *ch, int64_t *inner) {
    mxc__axis_split(s, bn_axis(p, s->ndim), outer, ch, inner);
    /* an empty array has no rows to walk: (2^24, 3, 0) would loop 2^24 times per
     * channel over nothing */
    if (*outer == 0 || *inner == 0)
        *outer = *inner = 0;
}

static inline bool bn_training(const struct mxc__op_call *c) {
    return c->is_train && !((const struct bn_param *)c->params)->use_global_stats;
}

/* 1 / sqrt(var + eps), in double as MXNet computes it */
static inline MXC__HD float mxc__bn_invstd(double var, double eps) {
    return (float)(1.0 / sqrt(var + eps));
}

/* A moving statistic after one training batch: moving * momentum + batch * (1 - momentum) */
static inline MXC__HD float mxc__bn_moving(float moving, float batch, float momentum) {
    return moving * momentum + batch * (1.0f - momentum);
}

/* out = x * scale + shift, scale = gamma * invstd, shift = beta - mean * scale */
static inline MXC__HD float mxc__bn_shift(float beta, float mean, float scale) {
    return beta - mean * scale;
}

/* dx = (dy - gmean - (x - mean) * kk) * iw, iw = invstd * gamma; in training gmean =
 * sum(dy) / m and kk = invstd² sum(dy (x - mean)) / m, otherwise both 0. */
static inline MXC__HD float mxc__bn_dx(float g, float x, float mean, float gmean, float kk,
                                       float iw) {
    return (g - gmean - (x - mean) * kk) * iw;
}

/* What the cuDNN path of operator/batch_norm.c needs besides cuDNN (operator/
 * batch_norm_gpu.cu; declared in every build, defined in CUDA builds), per channel k of
 * C, on call c's stream:
 * mxc__bn_dnn_stats_gpu: the hidden outputs mean and var (inverse std) as c's requests
 * say, and in training the moving statistics, from cuDNN's forward: in training the batch
 * mean and inverse std cuDNN saved, and the moving variance moved with the biased batch
 * variance uvar * (m - 1) / m (cuDNN gives the unbiased uvar of m elements a channel);
 * otherwise the moving mean and 1 / sqrt(moving var + eps), as the CPU writes them.
 * mxc__bn_dnn_param_grad_gpu: d_gamma (c->req[1]) = dscale, 0 with fix_gamma, and d_beta
 * (c->req[2]) = dbias, from cuDNN's backward.
 * mxc__bn_ones_gpu: o[0 .. n) = 1 (gamma read as 1 with fix_gamma). */
int mxc__bn_dnn_stats_gpu(const struct mxc__op_call *c, const float *save_mean,
                          const float *save_invstd, const float *uvar, int64_t m);
int mxc__bn_dnn_param_grad_gpu(const struct mxc__op_call *c, const float *dscale,
                               const float *dbias);
int mxc__bn_ones_gpu(float *o, int64_t n, void *stream);

#endif /* MXC_OPERATOR_BATCH_NORM_MATH_H */
