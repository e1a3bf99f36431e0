/*
 * operator/elemwise_ops.h — the one table of the element-wise family: per operator its
 * name, forward expression, gradient expression(s) and backward dependencies, written
 * once as X-macro lists. Expanded here into `static inline MXC__HD` functions (the
 * per-element arithmetic, DESIGN.md section 5a), by operator/elemwise.c into the CPU
 * loops and operator definitions, and by operator/elemwise_gpu.cu into the CUDA kernels.
 *
 * The expressions see: x (the input), s (the scalar parameter; 0 for operators without
 * one), g (the head gradient), y (the output); binary operators see a (lhs), b (rhs), g.
 * The dependency column says what the gradient reads besides g: IN (x, or a and b),
 * OUT (y), or 0 (nothing), so the executor can free what the backward does not read.
 */
#ifndef MXC_OPERATOR_ELEMWISE_OPS_H
#define MXC_OPERATOR_ELEMWISE_OPS_H

#include "common/hd.h"
#include "operator/fastmath.h"
#include "operator/op.h"

#include <math.h>

#define MXC__EW_IN  MXC__DEP_IN_DATA
#define MXC__EW_OUT MXC__DEP_OUT_DATA

/* -1, 0 or 1 (0 for NaN) */
static inline MXC__HD float mxc__ew_sign(float v) { return (float)((v > 0.0f) - (v < 0.0f)); }

/* X(ident, "name", "description", forward of x, gradient of g, x, y, deps) */
#define MXC__EW_UNARY(X)                                                                          \
    X(negative, "negative", "y = -x", -x, -g, 0)                                                  \
    X(abs, "abs", "y = |x|", fabsf(x), g *mxc__ew_sign(x), MXC__EW_IN)                            \
    X(sign, "sign", "y = sign(x)", mxc__ew_sign(x), 0.0f * g, 0)                                  \
    X(square, "square", "y = x^2", x *x, 2.0f * x * g, MXC__EW_IN)                                \
    X(sqrt, "sqrt", "y = sqrt(x)", sqrtf(x), g / (2.0f * y), MXC__EW_OUT)                         \
    X(rsqrt, "rsqrt", "y = 1 / sqrt(x)", 1.0f / sqrtf(x), -0.5f * y * y * y * g, MXC__EW_OUT)     \
    X(exp, "exp", "y = e^x", mxc__expf(x), y *g, MXC__EW_OUT)                                     \
    X(log, "log", "y = ln(x)", logf(x), g / x, MXC__EW_IN)                                        \
    X(sin, "sin", "y = sin(x)", sinf(x), cosf(x) * g, MXC__EW_IN)                                 \
    X(cos, "cos", "y = cos(x)", cosf(x), -sinf(x) * g, MXC__EW_IN)                                \
    X(relu, "relu", "y = max(x, 0)", x > 0.0f ? x : 0.0f, y > 0.0f ? g : 0.0f, MXC__EW_OUT)       \
    X(sigmoid, "sigmoid", "y = 1 / (1 + e^-x)", mxc__sigmoidf(x), y *(1.0f - y) * g, MXC__EW_OUT) \
    X(tanh, "tanh", "y = tanh(x)", mxc__tanhf(x), (1.0f - y * y) * g, MXC__EW_OUT)

/* X(ident, "name", "description", forward of x and s, gradient of g, x, y, s, deps);
 * smooth_l1 with sigma = s: 0.5 (sigma x)^2 where |x| < 1/sigma^2, else |x| - 0.5/sigma^2 */
#define MXC__EW_UNARY_SCALAR(X)                                                                    \
    X(_plus_scalar, "_plus_scalar", "y = x + scalar", x + s, g, 0)                                 \
    X(_minus_scalar, "_minus_scalar", "y = x - scalar", x - s, g, 0)                               \
    X(_rminus_scalar, "_rminus_scalar", "y = scalar - x", s - x, -g, 0)                            \
    X(_mul_scalar, "_mul_scalar", "y = x * scalar", x *s, g *s, 0)                                 \
    X(_div_scalar, "_div_scalar", "y = x / scalar", x / s, g / s, 0)                               \
    X(_rdiv_scalar, "_rdiv_scalar", "y = scalar / x", s / x, -s / (x * x) * g, MXC__EW_IN)         \
    X(_maximum_scalar, "_maximum_scalar", "y = max(x, scalar)", x >= s ? x : s, x >= s ? g : 0.0f, \
      MXC__EW_IN)                                                                                  \
    X(_minimum_scalar, "_minimum_scalar", "y = min(x, scalar)", x <= s ? x : s, x <= s ? g : 0.0f, \
      MXC__EW_IN)                                                                                  \
    X(_power_scalar, "_power_scalar", "y = x ^ scalar", powf(x, s), s *powf(x, s - 1.0f) * g,      \
      MXC__EW_IN)                                                                                  \
    X(smooth_l1, "smooth_l1", "Smooth L1 loss of x with sigma = scalar",                           \
      fabsf(x) < 1.0f / (s * s) ? 0.5f * s * s * x * x : fabsf(x) - 0.5f / (s * s),                \
      (fabsf(x) < 1.0f / (s * s) ? s * s * x : mxc__ew_sign(x)) * g, MXC__EW_IN)

/* X(ident, "name", "description", forward of a and b, gradient of a, gradient of b, deps)
 * (gradients of g, a, b) */
#define MXC__EW_BINARY(X)                                                           \
    X(_plus, "_plus", "y = lhs + rhs", a + b, g, g, 0)                              \
    X(_minus, "_minus", "y = lhs - rhs", a - b, g, -g, 0)                           \
    X(_mul, "_mul", "y = lhs * rhs", a *b, g *b, g *a, MXC__EW_IN)                  \
    X(_div, "_div", "y = lhs / rhs", a / b, g / b, -g * a / (b * b), MXC__EW_IN)    \
    X(_maximum, "_maximum", "y = max(lhs, rhs)", a >= b ? a : b, a >= b ? g : 0.0f, \
      a >= b ? 0.0f : g, MXC__EW_IN)                                                \
    X(_minimum, "_minimum", "y = min(lhs, rhs)", a <= b ? a : b, a <= b ? g : 0.0f, \
      a <= b ? 0.0f : g, MXC__EW_IN)                                                \
    X(_power, "_power", "y = lhs ^ rhs", powf(a, b), g *b *powf(a, b - 1.0f),       \
      g *powf(a, b) * logf(a), MXC__EW_IN)

/* The per-element functions: mxc__ew_<ident>_fwd(x, s), mxc__ew_<ident>_grad(g, x, y, s);
 * binary: mxc__ew_<ident>_fwd(a, b), _grad_a(g, a, b), _grad_b(g, a, b). Parameters an
 * expression does not use are simply unused (the Makefile allows that). */
#define MXC__EW_UNARY_FNS(ident, opname, desc, fwd, grad, deps)                              \
    static inline MXC__HD float mxc__ew_##ident##_fwd(float x, float s) { return fwd; }      \
    static inline MXC__HD float mxc__ew_##ident##_grad(float g, float x, float y, float s) { \
        return grad;                                                                         \
    }
#define MXC__EW_BINARY_FNS(ident, opname, desc, fwd, grad_a, grad_b, deps)              \
    static inline MXC__HD float mxc__ew_##ident##_fwd(float a, float b) { return fwd; } \
    static inline MXC__HD float mxc__ew_##ident##_grad_a(float g, float a, float b) {   \
        return grad_a;                                                                  \
    }                                                                                   \
    static inline MXC__HD float mxc__ew_##ident##_grad_b(float g, float a, float b) {   \
        return grad_b;                                                                  \
    }

MXC__EW_UNARY(MXC__EW_UNARY_FNS)
MXC__EW_UNARY_SCALAR(MXC__EW_UNARY_FNS)
MXC__EW_BINARY(MXC__EW_BINARY_FNS)

#endif /* MXC_OPERATOR_ELEMWISE_OPS_H */
