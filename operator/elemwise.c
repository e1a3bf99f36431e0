/*
 * operator/elemwise.c — the element-wise family (MXNet's SimpleOp), generated from the one
 * table of operator/elemwise_ops.h (a scalar expression and its derivative per operator),
 * which operator/elemwise_gpu.cu expands into the CUDA kernels too. The gradient kind decides the
 * backward dependencies: a derivative written with the input `x` needs in_data, one written with
 * the output `y` needs out_data, one with neither needs only out_grad — so the executor
 * can free what the backward does not read. All are float32, shapes (n), row-major; an
 * output may share memory with its input (in-place), which the loops allow.
 */
#include "operator/elemwise_ops.h"
#include "operator/gpu.h"

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

static const struct mxc__param alpha_beta_params[] = {
    MXC__P_FLOAT(struct mxc__ew_alpha_beta_param, alpha, "0.2", 1, 0, "slope"),
    MXC__P_FLOAT(struct mxc__ew_alpha_beta_param, beta, "0.5", 1, 0, "bias"),
};

/* Per parameter kind (MXC__EW_NO_PARAMS, ...): the table, its length, the struct's size
 * (constant expressions, for the definitions). */
#define KIND_PARAMS(k) \
    ((k) == MXC__EW_SCALAR ? scalar_params : (k) == MXC__EW_ALPHA_BETA ? alpha_beta_params : NULL)
#define KIND_NUM_PARAMS(k) ((k) == MXC__EW_SCALAR ? 1 : (k) == MXC__EW_ALPHA_BETA ? 2 : 0)
#define KIND_PARAM_SIZE(k)                                                 \
    ((k) == MXC__EW_SCALAR       ? sizeof(struct mxc__scalar_param)        \
     : (k) == MXC__EW_ALPHA_BETA ? sizeof(struct mxc__ew_alpha_beta_param) \
                                 : 0)

/* The shape function and definition of one operator of the table, on inputs `ins`, with
 * the parameters of `kind`; its kernels are ident##_forward, ident##_backward (CPU) and
 * mxc__ew_##ident##_forward_gpu, mxc__ew_##ident##_backward_gpu. */
#define EW_DEF(ident, opname, desc, deps, ins, kind)                                       \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no, \
                             mxc_shape *aux, int na) {                                     \
        return same_shape(p, in, ni, out, no, aux, na, opname);                            \
    }                                                                                      \
    const struct mxc__op_def mxc__op_##ident = {                                           \
        .name = opname,                                                                    \
        .description = desc,                                                               \
        .param_size = KIND_PARAM_SIZE(kind),                                               \
        .params = KIND_PARAMS(kind),                                                       \
        .num_params = KIND_NUM_PARAMS(kind),                                               \
        .inputs = ins,                                                                     \
        .outputs = out_output,                                                             \
        .infer_shape = ident##_shape,                                                      \
        .backward_deps = MXC__DEP_OUT_GRAD | (deps),                                       \
        .inplace = MXC__INPLACE(0, 0),                                                     \
        .backward_inplace = MXC__INPLACE(0, 0),                                            \
        .elementwise = true,                                                               \
        .forward_cpu = ident##_forward,                                                    \
        .backward_cpu = ident##_backward,                                                  \
        .forward_gpu = MXC__GPU(mxc__ew_##ident##_forward_gpu),                            \
        .backward_gpu = MXC__GPU(mxc__ew_##ident##_backward_gpu),                          \
    };

/* ---- Unary ------------------------------------------------------------------------- */

/* The CPU kernels and the definition of one unary operator of the table whose
 * expressions see the parameters of `kind` (s and t, 0 where the kind has none). */
#define UNARY(ident, opname, desc, fwd, grad, deps, kind)                             \
    static int ident##_forward(const struct mxc__op_call *c) {                        \
        const float *xs = c->in_data[0].data;                                         \
        float *o = c->out_data[0].data;                                               \
        float s, t;                                                                   \
        mxc__ew_params(c->params, kind, &s, &t);                                      \
        STORE_LOOP(c->req[0], o, c->out_data[0].size, float x = xs[i],                \
                   mxc__ew_##ident##_fwd(x, s, t));                                   \
        return MXC_OK;                                                                \
    }                                                                                 \
    static int ident##_backward(const struct mxc__op_call *c) {                       \
        const float *gs = c->out_grad[0].data;                                        \
        const float *xs = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 0) : NULL;   \
        const float *ys = ((deps)&MXC__DEP_OUT_DATA) ? TENSOR(c->out_data, 0) : NULL; \
        float *o = c->in_grad[0].data;                                                \
        float s, t;                                                                   \
        mxc__ew_params(c->params, kind, &s, &t);                                      \
        (void)xs;                                                                     \
        (void)ys;                                                                     \
        STORE_LOOP(c->req[0], o, c->in_grad[0].size, float g = gs[i];                 \
                   float x = ((deps)&MXC__DEP_IN_DATA) ? xs[i] : 0.0f;                \
                   float y = ((deps)&MXC__DEP_OUT_DATA) ? ys[i] : 0.0f,               \
                   mxc__ew_##ident##_grad(g, x, y, s, t));                            \
        return MXC_OK;                                                                \
    }                                                                                 \
    EW_DEF(ident, opname, desc, deps, in_data, kind)

/* The GPU kernels (operator/elemwise_gpu.cu), for every operator of the table. */
#ifdef MXC_USE_CUDA
#define GPU_DECL(ident, ...)                                         \
    int mxc__ew_##ident##_forward_gpu(const struct mxc__op_call *c); \
    int mxc__ew_##ident##_backward_gpu(const struct mxc__op_call *c);
MXC__EW_UNARY(GPU_DECL)
MXC__EW_UNARY_SCALAR(GPU_DECL)
MXC__EW_UNARY_ALPHA_BETA(GPU_DECL)
MXC__EW_BINARY(GPU_DECL)
#endif

#define UNARY_PLAIN(...)      UNARY(__VA_ARGS__, MXC__EW_NO_PARAMS)
#define UNARY_SCALAR(...)     UNARY(__VA_ARGS__, MXC__EW_SCALAR)
#define UNARY_ALPHA_BETA(...) UNARY(__VA_ARGS__, MXC__EW_ALPHA_BETA)

MXC__EW_UNARY(UNARY_PLAIN)
MXC__EW_UNARY_SCALAR(UNARY_SCALAR)
MXC__EW_UNARY_ALPHA_BETA(UNARY_ALPHA_BETA)

/* ---- Binary (same shapes) ---------------------------------------------------------- */

/* The backward computes both gradients of element i before storing either: in_grad[0]
 * may be out_grad[0] (in place), so storing the left gradient first and then reading g
 * for the right one would read the left gradient instead. */
#define BINARY(ident, opname, desc, fwd, grad_a, grad_b, deps)                      \
    static int ident##_forward(const struct mxc__op_call *c) {                      \
        const float *as = c->in_data[0].data, *bs = c->in_data[1].data;             \
        float *o = c->out_data[0].data;                                             \
        STORE_LOOP(c->req[0], o, c->out_data[0].size, float a = as[i];              \
                   float b = bs[i], mxc__ew_##ident##_fwd(a, b));                   \
        return MXC_OK;                                                              \
    }                                                                               \
    static int ident##_backward(const struct mxc__op_call *c) {                     \
        const float *gs = c->out_grad[0].data;                                      \
        const float *as = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 0) : NULL; \
        const float *bs = ((deps)&MXC__DEP_IN_DATA) ? TENSOR(c->in_data, 1) : NULL; \
        float *da = c->in_grad[0].data, *db = c->in_grad[1].data;                   \
        const int ra = c->req[0], rb = c->req[1];                                   \
        for (int64_t i = 0; i < c->out_grad[0].size; i++) {                         \
            const float g = gs[i];                                                  \
            const float a = ((deps)&MXC__DEP_IN_DATA) ? as[i] : 0.0f;               \
            const float b = ((deps)&MXC__DEP_IN_DATA) ? bs[i] : 0.0f;               \
            const float va = mxc__ew_##ident##_grad_a(g, a, b);                     \
            const float vb = mxc__ew_##ident##_grad_b(g, a, b);                     \
            PUT(ra, da, i, va);                                                     \
            PUT(rb, db, i, vb);                                                     \
        }                                                                           \
        return MXC_OK;                                                              \
    }                                                                               \
    EW_DEF(ident, opname, desc, deps, in_lhs_rhs, MXC__EW_NO_PARAMS)

MXC__EW_BINARY(BINARY)
