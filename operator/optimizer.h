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
    float gamma1, gamma2;           /* rmsprop_update, rmspropalex_update */
    float clip_weights;             /* rmsprop_update, rmspropalex_update */
    float lamda1, beta;             /* ftrl_update */
    float wd_lh;                    /* signum_update */
    float eta;                      /* _adamw_update */
    int t;                          /* lamb_update_phase1 */
    bool bias_correction;           /* lamb_update_phase1 */
    float lower_bound, upper_bound; /* lamb_update_phase2 */
    /* Not parameters: lamb_update_phase1's beta1^t and beta2^t, set once per call by
     * mxc__opt_prepare (host code) so that both devices divide by the same values. */
    float beta1_t, beta2_t;
};

/* x clipped to [-c, c]; c < 0: x unchanged (MXNet's clip_gradient and clip_weights). */
static inline MXC__HD float mxc__opt_clip(float x, float c) {
    return c >= 0.0f ? (x > c ? c : (x < -c ? -c : x)) : x;
}

/* -1, 0 or 1 (MXNet's sign: 0 for 0). */
static inline MXC__HD float mxc__opt_sign(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }

/* The gradient a step uses, from one element's grad g and weight w: rescale, clip
 * (clip_gradient < 0: none) and weight decay, with wd added after the clip (SGD) or before
 * it (Adam, RMSProp: wd_first), as MXNet 1.9.1 does. */
static inline MXC__HD float mxc__opt_step_grad(const struct mxc__opt_param *p, float g, float w,
                                               bool wd_first) {
    float x = p->rescale_grad * g;
    if (wd_first)
        x += p->wd * w;
    x = mxc__opt_clip(x, p->clip_gradient);
    if (!wd_first)
        x += p->wd * w;
    return x;
}

/*
 * The per-element steps. Every one has the same form: it takes the parameters, one
 * element's weight w and gradient g and its states s[0..] (read, then updated in place:
 * the caller loads them into a local array and stores them back), and returns the
 * operator's output for that element, the new weight (lamb_update_phase1: its g).
 * MXNet 1.9.1's formulas, in its order of operations.
 */

/* sgd_update: out = w - lr * (clip(rescale_grad * g) + wd * w) */
static inline MXC__HD float mxc__sgd_step(const struct mxc__opt_param *p, float w, float g,
                                          float *s) {
    (void)s;
    return w - p->lr * mxc__opt_step_grad(p, g, w, false);
}

/* sgd_mom_update, s = {mom}: mom = momentum * mom - lr * g'; out = w + mom */
static inline MXC__HD float mxc__sgd_mom_step(const struct mxc__opt_param *p, float w, float g,
                                              float *s) {
    s[0] = p->momentum * s[0] - p->lr * mxc__opt_step_grad(p, g, w, false);
    return w + s[0];
}

/* adam_update, s = {mean, var}, g' = clip(rescale_grad * g + wd * w):
 * mean = beta1 mean + (1 - beta1) g'; var = beta2 var + (1 - beta2) g'^2;
 * out = w - lr * mean / (sqrt(var) + epsilon) */
static inline MXC__HD float mxc__adam_step(const struct mxc__opt_param *p, float w, float g,
                                           float *s) {
    const float gi = mxc__opt_step_grad(p, g, w, true);
    s[0] = p->beta1 * s[0] + (1.0f - p->beta1) * gi;
    s[1] = p->beta2 * s[1] + (1.0f - p->beta2) * gi * gi;
    return w - p->lr * s[0] / (sqrtf(s[1]) + p->epsilon);
}

/* nag_mom_update, s = {mom}, gc = clip(rescale_grad * g), m = momentum * mom:
 * out = w - m + (momentum + 1) * (m - lr * (gc + wd * w)); mom = m - lr * (gc + wd * out).
 * The state takes the weight decay of the new weight: MXNet's kernel writes the output
 * before it updates mom from weight_data, which is the output when called in place, as
 * its NAG optimizer (and every caller) does; mxc gives that result however it is called. */
static inline MXC__HD float mxc__nag_mom_step(const struct mxc__opt_param *p, float w, float g,
                                              float *s) {
    const float gc = mxc__opt_clip(p->rescale_grad * g, p->clip_gradient);
    const float m = p->momentum * s[0];
    const float out = w - m + (p->momentum + 1.0f) * (m - p->lr * (gc + p->wd * w));
    s[0] = m - p->lr * (gc + p->wd * out);
    return out;
}

/* rmsprop_update, s = {n}, g' = clip(rescale_grad * g + wd * w):
 * n = (1 - gamma1) g'^2 + gamma1 n; out = clip_w(w - lr * g' / sqrt(n + epsilon)) */
static inline MXC__HD float mxc__rmsprop_step(const struct mxc__opt_param *p, float w, float g,
                                              float *s) {
    const float gi = mxc__opt_step_grad(p, g, w, true);
    s[0] = (1.0f - p->gamma1) * (gi * gi) + p->gamma1 * s[0];
    return mxc__opt_clip(w - p->lr * (gi / sqrtf(s[0] + p->epsilon)), p->clip_weights);
}

/* rmspropalex_update (centered, Graves 2013), s = {n, g, delta}, g' as rmsprop:
 * n = (1 - gamma1) g'^2 + gamma1 n; g = (1 - gamma1) g' + gamma1 g;
 * delta = gamma2 delta - lr * g' / sqrt(n - g^2 + epsilon); out = clip_w(w + delta) */
static inline MXC__HD float mxc__rmspropalex_step(const struct mxc__opt_param *p, float w, float g,
                                                  float *s) {
    const float gi = mxc__opt_step_grad(p, g, w, true);
    s[0] = (1.0f - p->gamma1) * gi * gi + p->gamma1 * s[0];
    s[1] = (1.0f - p->gamma1) * gi + p->gamma1 * s[1];
    s[2] = p->gamma2 * s[2] - p->lr * (gi / sqrtf(s[0] - s[1] * s[1] + p->epsilon));
    return mxc__opt_clip(w + s[2], p->clip_weights);
}

/* ftrl_update, s = {z, n}, gc = clip(rescale_grad * g):
 * z += gc - (sqrt(n + gc^2) - sqrt(n)) * w / lr; n += gc^2;
 * out = (sign(z) lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (|z| > lamda1) */
static inline MXC__HD float mxc__ftrl_step(const struct mxc__opt_param *p, float w, float g,
                                           float *s) {
    const float gc = mxc__opt_clip(p->rescale_grad * g, p->clip_gradient);
    s[0] += gc - (sqrtf(s[1] + gc * gc) - sqrtf(s[1])) * w / p->lr;
    s[1] += gc * gc;
    const float z = s[0];
    return (mxc__opt_sign(z) * p->lamda1 - z) / ((p->beta + sqrtf(s[1])) / p->lr + p->wd) *
           (float)(fabsf(z) > p->lamda1);
}

/* signsgd_update: out = (1 - lr wd) w - lr sign(g) (MXNet uses neither rescale_grad nor
 * clip_gradient here: neither changes a sign) */
static inline MXC__HD float mxc__signsgd_step(const struct mxc__opt_param *p, float w, float g,
                                              float *s) {
    (void)s;
    return (1.0f - p->lr * p->wd) * w - p->lr * mxc__opt_sign(g);
}

/* signum_update, s = {mom}, gc = clip(rescale_grad * g):
 * mom = momentum mom - (1 - momentum) wd w - (1 - momentum) gc;
 * out = (1 - lr wd_lh) w + lr sign(mom) */
static inline MXC__HD float mxc__signum_step(const struct mxc__opt_param *p, float w, float g,
                                             float *s) {
    const float gc = mxc__opt_clip(p->rescale_grad * g, p->clip_gradient);
    const float keep = 1.0f - p->momentum;
    s[0] = p->momentum * s[0] - keep * p->wd * w - keep * gc;
    return (1.0f - p->lr * p->wd_lh) * w + p->lr * mxc__opt_sign(s[0]);
}

/* _adamw_update, s = {mean, var}, rescale_grad read from its input tensor by the kernel,
 * gc = clip(g * rescale_grad): mean, var as Adam with gc;
 * out = w - eta * (lr * mean / (sqrt(var) + epsilon) + wd * w). A rescale_grad that is
 * not finite, or 0, skips the step (MXNet's loss-scaling overflow check): the states stay,
 * the output is the weight. */
static inline MXC__HD float mxc__adamw_step(const struct mxc__opt_param *p, float w, float g,
                                            float *s) {
    const float r = p->rescale_grad;
    if (!isfinite(r) || r == 0.0f)
        return w;
    const float gc = mxc__opt_clip(g * r, p->clip_gradient);
    s[0] = p->beta1 * s[0] + (1.0f - p->beta1) * gc;
    s[1] = p->beta2 * s[1] + (1.0f - p->beta2) * gc * gc;
    return w - p->eta * (p->lr * s[0] / (sqrtf(s[1]) + p->epsilon) + p->wd * w);
}

/* Host code, once per call before the map: lamb_update_phase1's beta1^t and beta2^t into
 * p (powf of float32, as MXNet; unread by the other operators). */
static inline void mxc__opt_prepare(struct mxc__opt_param *p) {
    p->beta1_t = powf(p->beta1, (float)p->t);
    p->beta2_t = powf(p->beta2, (float)p->t);
}

/* lamb_update_phase1, s = {mean, var}, gc = clip(g * rescale_grad): mean, var as Adam;
 * with bias_correction mean' = mean / (1 - beta1^t) (in double, as MXNet's `1.`),
 * var' = var / (1 - beta2^t), else mean' = mean, var' = var;
 * out (its g) = mean' / (sqrt(var') + epsilon) + wd * w */
static inline MXC__HD float mxc__lamb1_step(const struct mxc__opt_param *p, float w, float g,
                                            float *s) {
    const float gc = mxc__opt_clip(g * p->rescale_grad, p->clip_gradient);
    s[0] = p->beta1 * s[0] + (1.0f - p->beta1) * gc;
    s[1] = p->beta2 * s[1] + (1.0f - p->beta2) * gc * gc;
    float m = s[0], v = s[1];
    if (p->bias_correction) {
        m = (float)((double)m / (1.0 - (double)p->beta1_t));
        v = v / (1.0f - p->beta2_t);
    }
    return m / (sqrtf(v) + p->epsilon) + p->wd * w;
}

/* lamb_update_phase2 of one element from phase 1's g and the norms r1 = |w|, r2 = |g|:
 * r1 is kept within [lower_bound, upper_bound] (a negative bound is no bound); out =
 * w - lr * r1 / r2 * g, or w - lr * g when r1 or r2 is 0. */
static inline MXC__HD float mxc__lamb2_step(const struct mxc__opt_param *p, float w, float g,
                                            float r1, float r2) {
    if (p->lower_bound >= 0.0f)
        r1 = r1 > p->lower_bound ? r1 : p->lower_bound;
    if (p->upper_bound >= 0.0f)
        r1 = r1 < p->upper_bound ? r1 : p->upper_bound;
    if (r1 == 0.0f || r2 == 0.0f)
        return w - p->lr * g;
    return w - p->lr * r1 / r2 * g;
}

/*
 * The operators whose kernel is one map over the elements, as one X-macro list read by
 * operator/optimizer.c (definitions, CPU loops) and operator/optimizer_gpu.cu (kernels):
 * X(identifier, MXNet name, number of states, step, index of a (1) rescale_grad input or
 * -1). lamb_update_phase2, whose norms are not per element, is written out in both.
 */
#define MXC__OPT_MAPS(X)                                                      \
    X(sgd_update, "sgd_update", 0, mxc__sgd_step, -1)                         \
    X(sgd_mom_update, "sgd_mom_update", 1, mxc__sgd_mom_step, -1)             \
    X(adam_update, "adam_update", 2, mxc__adam_step, -1)                      \
    X(nag_mom_update, "nag_mom_update", 1, mxc__nag_mom_step, -1)             \
    X(rmsprop_update, "rmsprop_update", 1, mxc__rmsprop_step, -1)             \
    X(rmspropalex_update, "rmspropalex_update", 3, mxc__rmspropalex_step, -1) \
    X(ftrl_update, "ftrl_update", 2, mxc__ftrl_step, -1)                      \
    X(signsgd_update, "signsgd_update", 0, mxc__signsgd_step, -1)             \
    X(signum_update, "signum_update", 1, mxc__signum_step, -1)                \
    X(adamw_update, "_adamw_update", 2, mxc__adamw_step, 2)                   \
    X(lamb_update_phase1, "lamb_update_phase1", 2, mxc__lamb1_step, -1)

/*
 * Multi-precision SGD (a float16 weight with a float32 master copy, weight32): the steps
 * update the master w (returned) from the gradient g read as float32, in MXNet 1.9.1's
 * order of operations (weight decay on the master, before or beside the clipped gradient,
 * unlike sgd_update); the kernels store the result in the weight's dtype too.
 */

/* mp_sgd_update: w = (1 - lr * wd) * w - lr * clip(rescale_grad * g) */
static inline MXC__HD float mxc__mp_sgd_step(const struct mxc__opt_param *p, float w, float g,
                                             float *s) {
    (void)s;
    if (p->clip_gradient >= 0.0f)
        return (1.0f - p->lr * p->wd) * w -
               p->lr * mxc__opt_clip(p->rescale_grad * g, p->clip_gradient);
    return (1.0f - p->lr * p->wd) * w - (p->lr * p->rescale_grad) * g;
}

/* mp_sgd_mom_update, s = {mom}: mom = momentum * mom - lr * wd * w - lr * clip(rescale_grad
 * * g); w = w + mom */
static inline MXC__HD float mxc__mp_sgd_mom_step(const struct mxc__opt_param *p, float w, float g,
                                                 float *s) {
    if (p->clip_gradient >= 0.0f)
        s[0] = p->momentum * s[0] - p->lr * p->wd * w -
               p->lr * mxc__opt_clip(p->rescale_grad * g, p->clip_gradient);
    else
        s[0] = p->momentum * s[0] - p->lr * p->wd * w - p->lr * p->rescale_grad * g;
    return w + s[0];
}

/* The multi-precision steps: X(identifier, name, number of states before weight32, step). */
#define MXC__MP_MAPS(X)                                    \
    X(mp_sgd_update, "mp_sgd_update", 0, mxc__mp_sgd_step) \
    X(mp_sgd_mom_update, "mp_sgd_mom_update", 1, mxc__mp_sgd_mom_step)

#endif /* MXC_OPERATOR_OPTIMIZER_H */
