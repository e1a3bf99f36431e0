/*
 * operator/elemwise.c — the element-wise family (MXNet's SimpleOp), generated from a
 * scalar expression and its derivative. The gradient kind decides the backward
 * dependencies: a derivative written with the input `x` needs in_data, one written with
 * the output `y` needs out_data, one with neither needs only out_grad — so the executor
 * can free what the backward does not read. All are float32, shapes (n), row-major; an
 * output may share memory with its input (in-place), which the loops allow.
 */
#include "operator/op.h"
#include "operator/fastmath.h"

#include <math.h>

static const char *const in_data[] = {"data", NULL};
static const char *const in_lhs_rhs[] = {"lhs", "rhs", NULL};
static const char *const out_output[] = {"output", NULL};

/* ---- Shapes ------------------------------------------------------------------------ */

/* Every input and the output share one shape (deduced in either direction). */
static int same_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux, const char *op) {
    mxc_shape s = out[0];
    static const char *const names[] = {"lhs", "rhs"};
    for (int i = 0; i < num_in; i++) {
        int rc = mxc__shape_assign(&s, &in[i], op, num_in == 1 ? "data" : names[i]);
        if (rc != MXC_OK)
            return rc;
    }
    for (int i = 0; i < num_in; i++)
        in[i] = s;
    return mxc__shape_assign(&out[0], &s, op, "output");
}

/* ---- Loops ------------------------------------------------------------------------- */

/* For i in [0, n): runs `load` (declarations of the operands of element i), then
 * writes `expr` into o[i] as req asks. */
#define STORE_LOOP(req, o, n, load, expr)       \
    do {                                        \
        if ((req) == MXC__REQ_ADD) {            \
            for (int64_t i = 0; i < (n); i++) { \
                load;                           \
                (o)[i] += (expr);               \
            }                                   \
        } else if ((req) != MXC__REQ_NULL) {    \
            for (int64_t i = 0; i < (n); i++) { \
                load;                           \
                (o)[i] = (expr);                \
            }                                   \
        }                                       \
    } while (0)

/* o[i] = or += v as req asks; nothing for a null request (o may then be NULL). */
#define PUT(req, o, i, v)                \
    do {                                 \
        if ((req) == MXC__REQ_ADD)       \
            (o)[i] += (v);               \
        else if ((req) != MXC__REQ_NULL) \
            (o)[i] = (v);                \
    } while (0)

/* Data pointers of a call; those the operator did not declare are NULL and unused. */
#define TENSOR(arr, k) ((arr) ? (const float *)(arr)[k].data : NULL)

static const struct mxc__param scalar_params[] = {
    MXC__P_FLOAT(struct mxc__scalar_param, scalar, "1", 1, 0, "the scalar operand"),
};

#define SCALAR(c) (((const struct mxc__scalar_param *)(c)->params)->scalar)

/* ---- Unary ------------------------------------------------------------------------- */

/* UNARY(ident, "name", forward expression of x (and s), derivative of g, x, y, s, deps) */
#define UNARY_KERNELS(ident, fwd, grad, deps)                                                    \
    static int ident##_forward(const struct mxc__op_call *c) {                                   \
        const float *xs = c->in_data[0].data;                                                    \
        float *o = c->out_data[0].data;                                                          \
        const float s = c->params ? SCALAR(c) : 0.0f;                                            \
        (void)s;                                                                                 \
        STORE_LOOP(c->req[0], o, c->out_data[0].size, float x = xs[i], fwd);                     \
        return MXC_OK;                                                                           \
    }                                                                                            \
    static int ident##_backward(const struct mxc__op_call *c) {                                  \
        const float *gs = c->out_grad[0].data;                                                   \
        const float *xs = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 0) : NULL;              \
        const float *ys = ((deps)&MXC__DEP_OUT_DATA) ? TENSOR(c->out_data, 0) : NULL;            \
        float *o = c->in_grad[0].data;                                                           \
        const float s = c->params ? SCALAR(c) : 0.0f;                                            \
        (void)s;                                                                                 \
        (void)xs;                                                                                \
        (void)ys;                                                                                \
        STORE_LOOP(c->req[0], o, c->in_grad[0].size, float g = gs[i];                            \
                   float x = ((deps)&MXC__DEP_IN_DATA) ? xs[i] : 0.0f;                           \
                   float y = ((deps)&MXC__DEP_OUT_DATA) ? ys[i] : 0.0f; (void)x; (void)y, grad); \
        return MXC_OK;                                                                           \
    }                                                                                            \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no,       \
                             mxc_shape *aux, int na) {                                           \
        return same_shape(p, in, ni, out, no, aux, na, #ident);                                  \
    }

#define UNARY_DEF(ident, opname, desc, deps, with_scalar)                   \
    const struct mxc__op_def mxc__op_##ident = {                            \
        .name = opname,                                                     \
        .description = desc,                                                \
        .param_size = (with_scalar) ? sizeof(struct mxc__scalar_param) : 0, \
        .params = (with_scalar) ? scalar_params : NULL,                     \
        .num_params = (with_scalar) ? 1 : 0,                                \
        .inputs = in_data,                                                  \
        .outputs = out_output,                                              \
        .infer_shape = ident##_shape,                                       \
        .backward_deps = MXC__DEP_OUT_GRAD | (deps),                        \
        .inplace = MXC__INPLACE(0, 0),                                      \
        .backward_inplace = MXC__INPLACE(0, 0),                             \
        .elementwise = true,                                                \
        .forward_cpu = ident##_forward,                                     \
        .backward_cpu = ident##_backward,                                   \
    };

#define UNARY(ident, opname, desc, fwd, grad, deps) \
    UNARY_KERNELS(ident, fwd, grad, deps)           \
    UNARY_DEF(ident, opname, desc, deps, 0)

#define UNARY_SCALAR(ident, opname, desc, fwd, grad, deps) \
    UNARY_KERNELS(ident, fwd, grad, deps)                  \
    UNARY_DEF(ident, opname, desc, deps, 1)

#define IN      MXC__DEP_IN_DATA
#define OUT     MXC__DEP_OUT_DATA
#define SIGN(v) ((float)(((v) > 0.0f) - ((v) < 0.0f)))

UNARY(negative, "negative", "y = -x", -x, -g, 0)
UNARY(abs, "abs", "y = |x|", fabsf(x), g *SIGN(x), IN)
UNARY(sign, "sign", "y = sign(x)", SIGN(x), 0.0f * g, 0)
UNARY(square, "square", "y = x^2", x *x, 2.0f * x * g, IN)
UNARY(sqrt, "sqrt", "y = sqrt(x)", sqrtf(x), g / (2.0f * y), OUT)
UNARY(rsqrt, "rsqrt", "y = 1 / sqrt(x)", 1.0f / sqrtf(x), -0.5f * y * y * y * g, OUT)
UNARY(exp, "exp", "y = e^x", mxc__expf(x), y *g, OUT)
UNARY(log, "log", "y = ln(x)", logf(x), g / x, IN)
UNARY(sin, "sin", "y = sin(x)", sinf(x), cosf(x) * g, IN)
UNARY(cos, "cos", "y = cos(x)", cosf(x), -sinf(x) * g, IN)
UNARY(relu, "relu", "y = max(x, 0)", x > 0.0f ? x : 0.0f, y > 0.0f ? g : 0.0f, OUT)
UNARY(sigmoid, "sigmoid", "y = 1 / (1 + e^-x)", mxc__sigmoidf(x), y *(1.0f - y) * g, OUT)
UNARY(tanh, "tanh", "y = tanh(x)", mxc__tanhf(x), (1.0f - y * y) * g, OUT)

UNARY_SCALAR(_plus_scalar, "_plus_scalar", "y = x + scalar", x + s, g, 0)
UNARY_SCALAR(_minus_scalar, "_minus_scalar", "y = x - scalar", x - s, g, 0)
UNARY_SCALAR(_rminus_scalar, "_rminus_scalar", "y = scalar - x", s - x, -g, 0)
UNARY_SCALAR(_mul_scalar, "_mul_scalar", "y = x * scalar", x *s, g *s, 0)
UNARY_SCALAR(_div_scalar, "_div_scalar", "y = x / scalar", x / s, g / s, 0)
UNARY_SCALAR(_rdiv_scalar, "_rdiv_scalar", "y = scalar / x", s / x, -s / (x * x) * g, IN)
UNARY_SCALAR(_maximum_scalar, "_maximum_scalar", "y = max(x, scalar)", x >= s ? x : s,
             x >= s ? g : 0.0f, IN)
UNARY_SCALAR(_minimum_scalar, "_minimum_scalar", "y = min(x, scalar)", x <= s ? x : s,
             x <= s ? g : 0.0f, IN)
UNARY_SCALAR(_power_scalar, "_power_scalar", "y = x ^ scalar", powf(x, s), s *powf(x, s - 1.0f) * g,
             IN)
/* smooth_l1 with sigma = scalar: 0.5 (sigma x)^2 where |x| < 1/sigma^2, else |x| - 0.5/sigma^2 */
UNARY_SCALAR(smooth_l1, "smooth_l1", "Smooth L1 loss of x with sigma = scalar",
             fabsf(x) < 1.0f / (s * s) ? 0.5f * s * s * x * x : fabsf(x) - 0.5f / (s * s),
             (fabsf(x) < 1.0f / (s * s) ? s * s * x : SIGN(x)) * g, IN)

/* ---- Binary (same shapes) ---------------------------------------------------------- */

/* The backward computes both gradients of element i before storing either: in_grad[0]
 * may be out_grad[0] (in place), so storing the left gradient first and then reading g
 * for the right one would read the left gradient instead. */
#define BINARY(ident, opname, desc, fwd, grad_a, grad_b, deps)                                \
    static int ident##_forward(const struct mxc__op_call *c) {                                \
        const float *as = c->in_data[0].data, *bs = c->in_data[1].data;                       \
        float *o = c->out_data[0].data;                                                       \
        STORE_LOOP(c->req[0], o, c->out_data[0].size, float a = as[i]; float b = bs[i], fwd); \
        return MXC_OK;                                                                        \
    }                                                                                         \
    static int ident##_backward(const struct mxc__op_call *c) {                               \
        const float *gs = c->out_grad[0].data;                                                \
        const float *as = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 0) : NULL;           \
        const float *bs = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 1) : NULL;           \
        float *da = c->in_grad[0].data, *db = c->in_grad[1].data;                             \
        const int ra = c->req[0], rb = c->req[1];                                             \
        for (int64_t i = 0; i < c->out_grad[0].size; i++) {                                   \
            const float g = gs[i];                                                            \
            const float a = ((deps)&MXC__DEP_IN_DATA) ? as[i] : 0.0f;                         \
            const float b = ((deps)&MXC__DEP_IN_DATA) ? bs[i] : 0.0f;                         \
            const float va = (grad_a), vb = (grad_b);                                         \
            (void)a, (void)b;                                                                 \
            PUT(ra, da, i, va);                                                               \
            PUT(rb, db, i, vb);                                                               \
        }                                                                                     \
        return MXC_OK;                                                                        \
    }                                                                                         \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no,    \
                             mxc_shape *aux, int na) {                                        \
        return same_shape(p, in, ni, out, no, aux, na, opname);                               \
    }                                                                                         \
    const struct mxc__op_def mxc__op_##ident = {                                              \
        .name = opname,                                                                       \
        .description = desc,                                                                  \
        .inputs = in_lhs_rhs,                                                                 \
        .outputs = out_output,                                                                \
        .infer_shape = ident##_shape,                                                         \
        .backward_deps = MXC__DEP_OUT_GRAD | (deps),                                          \
        .inplace = MXC__INPLACE(0, 0),                                                        \
        .backward_inplace = MXC__INPLACE(0, 0),                                               \
        .elementwise = true,                                                                  \
        .forward_cpu = ident##_forward,                                                       \
        .backward_cpu = ident##_backward,                                                     \
    };

BINARY(_plus, "_plus", "y = lhs + rhs", a + b, g, g, 0)
BINARY(_minus, "_minus", "y = lhs - rhs", a - b, g, -g, 0)
BINARY(_mul, "_mul", "y = lhs * rhs", a *b, g *b, g *a, IN)
BINARY(_div, "_div", "y = lhs / rhs", a / b, g / b, -g *a / (b * b), IN)
BINARY(_maximum, "_maximum", "y = max(lhs, rhs)", a >= b ? a : b, a >= b ? g : 0.0f,
       a >= b ? 0.0f : g, IN)
BINARY(_minimum, "_minimum", "y = min(lhs, rhs)", a <= b ? a : b, a <= b ? g : 0.0f,
       a <= b ? 0.0f : g, IN)
BINARY(_power, "_power", "y = lhs ^ rhs", powf(a, b), g *b *powf(a, b - 1.0f),
       g *powf(a, b) * logf(a), IN)
