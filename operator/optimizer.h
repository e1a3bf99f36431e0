/*
 * operator/optimizer.h — the optimizer operators' parameters and per-element update
 * arithmetic (formulas in operator/optimizer.c), one MXC__HD function per optimizer,
 * called by the CPU loops (operator/optimizer.c) and the CUDA kernels
 * (operator/optimizer_gpu.cu) alike.
 */
#ifndef MXC_OPERATOR_OPTIMIZER_H
#define MXC_OPERATOR_OPTIMIZER_H

#include "common/hd.h"

#include <math.h>
#include <stdbool.h>

/* One parameter struct for the family; each operator's table lists the fields it takes
 * (the others stay zero and unread). */
struct mxc__opt_param {
    float lr;
    float momentum;
    float beta1, beta2, epsilon;
    float wd;
    float rescale_grad;
    float clip_gradient;
    bool lazy_update;
};

/* The gradient a step uses, from one element's grad g and weight w: rescale, clip
 * (clip_gradient < 0: none) and weight decay, with wd added after the clip (SGD) or before
 * it (Adam, wd_first), as MXNet 1.9.1 does. */
static inline MXC__HD float mxc__opt_step_grad(const struct mxc__opt_param *p, float g, float w,
                                               bool wd_first) {
    float x = p->rescale_grad * g;
    if (wd_first)
        x += p->wd * w;
    const float c = p->clip_gradient;
    if (c >= 0.0f)
        x = x > c ? c : (x < -c ? -c : x);
    if (!wd_first)
        x += p->wd * w;
    return x;
}

/* sgd_update of one element: the new weight. */
static inline MXC__HD float mxc__sgd_step(const struct mxc__opt_param *p, float w, float g) {
    return w - p->lr * mxc__opt_step_grad(p, g, w, false);
}

/* sgd_mom_update of one element: updates *mom, returns the new weight. */
static inline MXC__HD float mxc__sgd_mom_step(const struct mxc__opt_param *p, float w, float g,
                                              float *mom) {
    const float m = p->momentum * *mom - p->lr * mxc__opt_step_grad(p, g, w, false);
    *mom = m;
    return w + m;
}

/* adam_update of one element: updates *mean and *var, returns the new weight. */
static inline MXC__HD float mxc__adam_step(const struct mxc__opt_param *p, float w, float g,
                                           float *mean, float *var) {
    const float gi = mxc__opt_step_grad(p, g, w, true);
    const float m = p->beta1 * *mean + (1.0f - p->beta1) * gi;
    const float v = p->beta2 * *var + (1.0f - p->beta2) * gi * gi;
    *mean = m;
    *var = v;
    return w - p->lr * m / (sqrtf(v) + p->epsilon);
}

#endif /* MXC_OPERATOR_OPTIMIZER_H */
