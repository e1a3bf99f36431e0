/*
 * operator/activation_math.h — the per-element arithmetic of Activation and LeakyReLU
 * (operator/activation.c on the CPU, operator/activation_gpu.cu on a GPU), written once
 * as MXC__HD functions, with the parameters and act_type codes both files read.
 * Activation's gradients are written with the output y = f(x), LeakyReLU's with x.
 */
#ifndef MXC_OPERATOR_ACTIVATION_MATH_H
#define MXC_OPERATOR_ACTIVATION_MATH_H

#include "common/hd.h"
#include "operator/fastmath.h"
#include "operator/op.h"

#include <math.h>

/* ---- Activation -------------------------------------------------------------------- */

enum { ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_SOFTRELU, ACT_SOFTSIGN };

struct act_param {
    int act_type;
};

static inline MXC__HD float mxc__relu(float x) { return x > 0.0f ? x : 0.0f; }

/* softrelu(x) = log(1 + e^x), computed as x above 20 where the two agree in float. */
static inline MXC__HD float mxc__softrelu(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static inline MXC__HD float mxc__softsign(float x) { return x / (1.0f + fabsf(x)); }

/* dy * f'(x), with f' written through y = f(x): relu 1[y > 0], sigmoid y (1 - y), tanh
 * 1 - y², softrelu 1 - e^-y (= sigmoid(x)), softsign (1 - |y|)² (= 1 / (1 + |x|)²). */
static inline MXC__HD float mxc__relu_grad(float y, float g) { return y > 0.0f ? g : 0.0f; }
static inline MXC__HD float mxc__sigmoid_grad(float y, float g) { return g * y * (1.0f - y); }
static inline MXC__HD float mxc__tanh_grad(float y, float g) { return g * (1.0f - y * y); }
static inline MXC__HD float mxc__softrelu_grad(float y, float g) { return g * -expm1f(-y); }
static inline MXC__HD float mxc__softsign_grad(float y, float g) {
    return g * (1.0f - fabsf(y)) * (1.0f - fabsf(y));
}

/* f(x) and dy * f'(x) for act_type `t` (the CPU loops call the functions above directly,
 * each in its own loop, so that they vectorise). */
static inline MXC__HD float mxc__act(int t, float x) {
    switch (t) {
    case ACT_RELU: return mxc__relu(x);
    case ACT_SIGMOID: return mxc__sigmoidf(x);
    case ACT_TANH: return mxc__tanhf(x);
    case ACT_SOFTRELU: return mxc__softrelu(x);
    default: return mxc__softsign(x);
    }
}

static inline MXC__HD float mxc__act_grad(int t, float y, float g) {
    switch (t) {
    case ACT_RELU: return mxc__relu_grad(y, g);
    case ACT_SIGMOID: return mxc__sigmoid_grad(y, g);
    case ACT_TANH: return mxc__tanh_grad(y, g);
    case ACT_SOFTRELU: return mxc__softrelu_grad(y, g);
    default: return mxc__softsign_grad(y, g);
    }
}

/* ---- LeakyReLU --------------------------------------------------------------------- */

enum { LR_RRELU, LR_LEAKY, LR_PRELU, LR_ELU, LR_SELU, LR_GELU };

struct leaky_param {
    int act_type;
    float slope;
    float lower_bound;
    float upper_bound;
};

/* SELU's constants (Klambauer et al. 2017), as MXNet uses them. */
#define SELU_ALPHA  1.6732632423543772848170429916717f
#define SELU_LAMBDA 1.0507009873554804934193349852946f
#define SQRT1_2     0.70710678118654752f /* 1 / sqrt(2) */

/* x, or a x below 0 (leaky with the slope a; prelu with its channel's gamma). */
static inline MXC__HD float mxc__leaky(float x, float a) { return x > 0.0f ? x : a * x; }
static inline MXC__HD float mxc__elu(float x, float a) { return x > 0.0f ? x : a * expm1f(x); }
static inline MXC__HD float mxc__selu(float x) {
    return SELU_LAMBDA * (x > 0.0f ? x : SELU_ALPHA * expm1f(x));
}
static inline MXC__HD float mxc__gelu(float x) { return 0.5f * x * (1.0f + erff(x * SQRT1_2)); }

/* dy * f'(x) */
static inline MXC__HD float mxc__leaky_grad(float x, float g, float a) {
    return x > 0.0f ? g : a * g;
}
static inline MXC__HD float mxc__elu_grad(float x, float g, float a) {
    return x > 0.0f ? g : a * expf(x) * g;
}
static inline MXC__HD float mxc__selu_grad(float x, float g) {
    return SELU_LAMBDA * (x > 0.0f ? g : SELU_ALPHA * expf(x) * g);
}
/* gelu' = Φ(x) + x φ(x) */
static inline MXC__HD float mxc__gelu_grad(float x, float g) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    return (0.5f * (1.0f + erff(x * SQRT1_2)) + x * inv_sqrt_2pi * expf(-0.5f * x * x)) * g;
}
/* prelu: one element's share of d_gamma, dy * x where x <= 0 */
static inline MXC__HD float mxc__prelu_gamma_grad(float x, float g) {
    return x > 0.0f ? 0.0f : x * g;
}

/* f(x) and dy * f'(x) for the element-wise act_types (not prelu, whose slope is per
 * channel: it is mxc__leaky with the channel's gamma); a is the slope param. */
static inline MXC__HD float mxc__leaky_act(int t, float x, float a) {
    switch (t) {
    case LR_ELU: return mxc__elu(x, a);
    case LR_SELU: return mxc__selu(x);
    case LR_GELU: return mxc__gelu(x);
    default: return mxc__leaky(x, a);
    }
}

static inline MXC__HD float mxc__leaky_act_grad(int t, float x, float g, float a) {
    switch (t) {
    case LR_ELU: return mxc__elu_grad(x, g, a);
    case LR_SELU: return mxc__selu_grad(x, g);
    case LR_GELU: return mxc__gelu_grad(x, g);
    default: return mxc__leaky_grad(x, g, a);
    }
}

/* The layout prelu broadcasts gamma over: data (outer, C, inner), gamma (C), or (1) with
 * gstride 0: one slope for every channel. Host only. */
static inline void mxc__prelu_dims(const struct mxc__op_call *c, int64_t *outer, int64_t *ch,
                                   int64_t *inner, int64_t *gstride) {
    const mxc_shape *s = &c->in_data[0].shape;
    *outer = s->dims[0];
    *ch = s->dims[1];
    *inner = 1;
    for (int d = 2; d < s->ndim; d++)
        *inner *= s->dims[d];
    *gstride = c->in_data[1].size == 1 ? 0 : 1;
}

#endif /* MXC_OPERATOR_ACTIVATION_MATH_H */
