/*
 * operator/elemwise_ops.h — the one table of the element-wise family: per operator its
 * name, forward expression, gradient expression(s) and backward dependencies, written
 * once as X-macro lists. Expanded here into `static inline MXC__HD` functions (the
 * per-element arithmetic, DESIGN.md section 5a), by operator/elemwise.c into the CPU
 * loops and operator definitions, and by operator/elemwise_gpu.cu into the CUDA kernels.
 *
 * The expressions see: x (the input), s (the scalar parameter, or alpha; 0 for operators
 * without one), t (beta; 0 for operators without it), g (the head gradient), y (the
 * output); binary operators see a (lhs), b (rhs), g. Comparisons and logical operators
 * give 1 or 0 (floats) and, as in MXNet, a gradient of exact zeros; so do the roundings.
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

/* MXNet's rint: the nearer integer, a half going down (rint(2.5) = 2, rint(-0.5) = -1),
 * unlike C's rintf, which goes to even. */
static inline MXC__HD float mxc__ew_rint(float v) {
    const float lo = floorf(v), hi = ceilf(v);
    return v - lo <= hi - v ? lo : hi;
}

/* MXNet's fix: towards zero (trunc, written as MXNet writes it). */
static inline MXC__HD float mxc__ew_fix(float v) { return v > 0.0f ? floorf(v) : ceilf(v); }

/* 1 or 0 from a condition. */
#define MXC__EW_BOOL(c) ((c) ? 1.0f : 0.0f)

#define MXC__EW_LN2      0.693147180559945309f
#define MXC__EW_LN10     2.302585092994045684f
#define MXC__EW_2_SQRTPI 1.128379167095512574f /* d/dx erf(x) = 2/sqrt(pi) e^(-x^2) */
#define MXC__EW_DEGREES  57.29577951308232088f /* 180 / pi */
#define MXC__EW_RADIANS  0.017453292519943296f /* pi / 180 */

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
    X(tanh, "tanh", "y = tanh(x)", mxc__tanhf(x), (1.0f - y * y) * g, MXC__EW_OUT)                \
    X(log1p, "log1p", "y = ln(1 + x)", log1pf(x), g / (1.0f + x), MXC__EW_IN)                     \
    X(expm1, "expm1", "y = e^x - 1", expm1f(x), g *mxc__expf(x), MXC__EW_IN)                      \
    X(floor, "floor", "y = floor(x)", floorf(x), 0.0f, 0)                                         \
    X(ceil, "ceil", "y = ceil(x)", ceilf(x), 0.0f, 0)                                             \
    X(round, "round", "y = x rounded, halves away from 0", roundf(x), 0.0f, 0)                    \
    X(rint, "rint", "y = x rounded, halves down (MXNet's rint)", mxc__ew_rint(x), 0.0f, 0)        \
    X(trunc, "trunc", "y = x rounded towards 0", truncf(x), 0.0f, 0)                              \
    X(fix, "fix", "y = x rounded towards 0", mxc__ew_fix(x), 0.0f, 0)                             \
    X(reciprocal, "reciprocal", "y = 1 / x", 1.0f / x, -g / (x * x), MXC__EW_IN)                  \
    X(erf, "erf", "y = erf(x)", erff(x), g *MXC__EW_2_SQRTPI *mxc__expf(-x *x), MXC__EW_IN)       \
    X(softsign, "softsign", "y = x / (1 + |x|)", x / (1.0f + fabsf(x)),                           \
      g / ((1.0f + fabsf(x)) * (1.0f + fabsf(x))), MXC__EW_IN)                                    \
    X(cbrt, "cbrt", "y = x^(1/3)", cbrtf(x), g / (3.0f * y * y), MXC__EW_OUT)                     \
    X(log2, "log2", "y = log2(x)", log2f(x), g / (x * MXC__EW_LN2), MXC__EW_IN)                   \
    X(log10, "log10", "y = log10(x)", log10f(x), g / (x * MXC__EW_LN10), MXC__EW_IN)              \
    X(tan, "tan", "y = tan(x)", tanf(x), (y * y + 1.0f) * g, MXC__EW_OUT)                         \
    X(arcsin, "arcsin", "y = asin(x)", asinf(x), g / sqrtf(1.0f - x * x), MXC__EW_IN)             \
    X(arccos, "arccos", "y = acos(x)", acosf(x), -g / sqrtf(1.0f - x * x), MXC__EW_IN)            \
    X(arctan, "arctan", "y = atan(x)", atanf(x), g / (x * x + 1.0f), MXC__EW_IN)                  \
    X(sinh, "sinh", "y = sinh(x)", sinhf(x), g *coshf(x), MXC__EW_IN)                             \
    X(cosh, "cosh", "y = cosh(x)", coshf(x), g *sinhf(x), MXC__EW_IN)                             \
    X(arcsinh, "arcsinh", "y = asinh(x)", asinhf(x), g / sqrtf(x * x + 1.0f), MXC__EW_IN)         \
    X(arccosh, "arccosh", "y = acosh(x)", acoshf(x), g / sqrtf(x * x - 1.0f), MXC__EW_IN)         \
    X(arctanh, "arctanh", "y = atanh(x)", atanhf(x), g / (1.0f - x * x), MXC__EW_IN)              \
    X(degrees, "degrees", "y = x in degrees", x *MXC__EW_DEGREES, g *MXC__EW_DEGREES, 0)          \
    X(radians, "radians", "y = x in radians", x *MXC__EW_RADIANS, g *MXC__EW_RADIANS, 0)          \
    X(logical_not, "logical_not", "y = 1 where x is 0, else 0", MXC__EW_BOOL(x == 0.0f), 0.0f, 0) \
    X(zeros_like, "zeros_like", "y = 0, of x's shape", 0.0f, 0.0f, 0)                             \
    X(ones_like, "ones_like", "y = 1, of x's shape", 1.0f, 0.0f, 0)

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
      (fabsf(x) < 1.0f / (s * s) ? s * s * x : mxc__ew_sign(x)) * g, MXC__EW_IN)                   \
    X(_hypot_scalar, "_hypot_scalar", "y = sqrt(x^2 + scalar^2)", hypotf(x, s),                    \
      g *x / hypotf(x, s), MXC__EW_IN)                                                             \
    X(_equal_scalar, "_equal_scalar", "y = (x == scalar)", MXC__EW_BOOL(x == s), 0.0f, 0)          \
    X(_not_equal_scalar, "_not_equal_scalar", "y = (x != scalar)", MXC__EW_BOOL(x != s), 0.0f, 0)  \
    X(_greater_scalar, "_greater_scalar", "y = (x > scalar)", MXC__EW_BOOL(x > s), 0.0f, 0)        \
    X(_greater_equal_scalar, "_greater_equal_scalar", "y = (x >= scalar)", MXC__EW_BOOL(x >= s),   \
      0.0f, 0)                                                                                     \
    X(_lesser_scalar, "_lesser_scalar", "y = (x < scalar)", MXC__EW_BOOL(x < s), 0.0f, 0)          \
    X(_lesser_equal_scalar, "_lesser_equal_scalar", "y = (x <= scalar)", MXC__EW_BOOL(x <= s),     \
      0.0f, 0)                                                                                     \
    X(_logical_and_scalar, "_logical_and_scalar", "y = (x != 0 and scalar != 0)",                  \
      MXC__EW_BOOL(x != 0.0f && s != 0.0f), 0.0f, 0)                                               \
    X(_logical_or_scalar, "_logical_or_scalar", "y = (x != 0 or scalar != 0)",                     \
      MXC__EW_BOOL(x != 0.0f || s != 0.0f), 0.0f, 0)                                               \
    X(_logical_xor_scalar, "_logical_xor_scalar", "y = ((x != 0) != (scalar != 0))",               \
      MXC__EW_BOOL((x != 0.0f) != (s != 0.0f)), 0.0f, 0)

/* X(ident, "name", "description", forward of x, s = alpha and t = beta, gradient, deps) */
#define MXC__EW_UNARY_ALPHA_BETA(X)                                                           \
    X(hard_sigmoid, "hard_sigmoid", "y = max(0, min(1, alpha x + beta))",                     \
      fmaxf(0.0f, fminf(1.0f, s *x + t)), s *x + t > 0.0f && s * x + t < 1.0f ? g * s : 0.0f, \
      MXC__EW_IN)

/* X(ident, "name", "description", forward of a and b, gradient of a, gradient of b, deps)
 * (gradients of g, a, b) */
#define MXC__EW_BINARY(X)                                                                        \
    X(_plus, "_plus", "y = lhs + rhs", a + b, g, g, 0)                                           \
    X(_minus, "_minus", "y = lhs - rhs", a - b, g, -g, 0)                                        \
    X(_mul, "_mul", "y = lhs * rhs", a *b, g *b, g *a, MXC__EW_IN)                               \
    X(_div, "_div", "y = lhs / rhs", a / b, g / b, -g * a / (b * b), MXC__EW_IN)                 \
    X(_maximum, "_maximum", "y = max(lhs, rhs)", a >= b ? a : b, a >= b ? g : 0.0f,              \
      a >= b ? 0.0f : g, MXC__EW_IN)                                                             \
    X(_minimum, "_minimum", "y = min(lhs, rhs)", a <= b ? a : b, a <= b ? g : 0.0f,              \
      a <= b ? 0.0f : g, MXC__EW_IN)                                                             \
    X(_power, "_power", "y = lhs ^ rhs", powf(a, b), g *b *powf(a, b - 1.0f),                    \
      g *powf(a, b) * logf(a), MXC__EW_IN)                                                       \
    X(_hypot, "_hypot", "y = sqrt(lhs^2 + rhs^2)", hypotf(a, b), g *a / hypotf(a, b),            \
      g * b / hypotf(a, b), MXC__EW_IN)                                                          \
    X(_equal, "_equal", "y = (lhs == rhs)", MXC__EW_BOOL(a == b), 0.0f, 0.0f, 0)                 \
    X(_not_equal, "_not_equal", "y = (lhs != rhs)", MXC__EW_BOOL(a != b), 0.0f, 0.0f, 0)         \
    X(_greater, "_greater", "y = (lhs > rhs)", MXC__EW_BOOL(a > b), 0.0f, 0.0f, 0)               \
    X(_greater_equal, "_greater_equal", "y = (lhs >= rhs)", MXC__EW_BOOL(a >= b), 0.0f, 0.0f, 0) \
    X(_lesser, "_lesser", "y = (lhs < rhs)", MXC__EW_BOOL(a < b), 0.0f, 0.0f, 0)                 \
    X(_lesser_equal, "_lesser_equal", "y = (lhs <= rhs)", MXC__EW_BOOL(a <= b), 0.0f, 0.0f, 0)   \
    X(_logical_and, "_logical_and", "y = (lhs != 0 and rhs != 0)",                               \
      MXC__EW_BOOL(a != 0.0f && b != 0.0f), 0.0f, 0.0f, 0)                                       \
    X(_logical_or, "_logical_or", "y = (lhs != 0 or rhs != 0)",                                  \
      MXC__EW_BOOL(a != 0.0f || b != 0.0f), 0.0f, 0.0f, 0)                                       \
    X(_logical_xor, "_logical_xor", "y = ((lhs != 0) != (rhs != 0))",                            \
      MXC__EW_BOOL((a != 0.0f) != (b != 0.0f)), 0.0f, 0.0f, 0)

/* The per-element functions: mxc__ew_<ident>_fwd(x, s, t), mxc__ew_<ident>_grad(g, x, y,
 * s, t); binary: mxc__ew_<ident>_fwd(a, b), _grad_a(g, a, b), _grad_b(g, a, b), and the
 * constant mxc__ew_<ident>_deps (operator/broadcast.c runs the binary ones broadcast).
 * Parameters an expression does not use are simply unused (the Makefile allows that). */
#define MXC__EW_UNARY_FNS(ident, opname, desc, fwd, grad, deps)                                  \
    static inline MXC__HD float mxc__ew_##ident##_fwd(float x, float s, float t) { return fwd; } \
    static inline MXC__HD float mxc__ew_##ident##_grad(float g, float x, float y, float s,       \
                                                       float t) {                                \
        return grad;                                                                             \
    }
#define MXC__EW_BINARY_FNS(ident, opname, desc, fwd, grad_a, grad_b, deps)              \
    enum { mxc__ew_##ident##_deps = (deps) };                                           \
    static inline MXC__HD float mxc__ew_##ident##_fwd(float a, float b) { return fwd; } \
    static inline MXC__HD float mxc__ew_##ident##_grad_a(float g, float a, float b) {   \
        return grad_a;                                                                  \
    }                                                                                   \
    static inline MXC__HD float mxc__ew_##ident##_grad_b(float g, float a, float b) {   \
        return grad_b;                                                                  \
    }

MXC__EW_UNARY(MXC__EW_UNARY_FNS)
MXC__EW_UNARY_SCALAR(MXC__EW_UNARY_FNS)
MXC__EW_UNARY_ALPHA_BETA(MXC__EW_UNARY_FNS)
MXC__EW_BINARY(MXC__EW_BINARY_FNS)

/* The parameters of the MXC__EW_UNARY_ALPHA_BETA operators. */
struct mxc__ew_alpha_beta_param {
    float alpha, beta;
};

/* Which parameters a unary operator's expressions see: none, scalar (s), alpha and beta
 * (s, t). */
enum { MXC__EW_NO_PARAMS, MXC__EW_SCALAR, MXC__EW_ALPHA_BETA };

/* s and t of a call's params (host memory) for a unary operator of kind `kind`. */
static inline void mxc__ew_params(const void *params, int kind, float *s, float *t) {
    *s = *t = 0.0f;
    if (kind == MXC__EW_SCALAR) {
        *s = ((const struct mxc__scalar_param *)params)->scalar;
    } else if (kind == MXC__EW_ALPHA_BETA) {
        *s = ((const struct mxc__ew_alpha_beta_param *)params)->alpha;
        *t = ((const struct mxc__ew_alpha_beta_param *)params)->beta;
    }
}

#endif /* MXC_OPERATOR_ELEMWISE_OPS_H */
