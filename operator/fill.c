/*
 * operator/fill.c — MXNet's fill operators without inputs: `_zeros`, `_ones` and `_full`
 * (mx.sym.zeros / ones / full) make an array of their `shape` holding one value. As in
 * MXNet 1.x, a 0 in `shape` (or an empty shape) means "unknown": shape inference takes the
 * output's shape from the consumer (Gluon's LSTM makes its begin states as _zeros of shape
 * (L, 0, H), the 0 being the batch) and checks it against the known dims. `ctx` is
 * accepted and ignored, as MXNet's symbols ignore it for the context they are bound to.
 * Not differentiable. The kernels are the arrays' fill (ndarray/fill_gpu.cu on a GPU).
 * zeros_like and ones_like, which have an input, are element-wise operators
 * (operator/elemwise_ops.h).
 */
#include "ndarray/ndarray_impl.h"
#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

struct fill_param {
    mxc_shape shape;
    char ctx[MXC__PARAM_STRING_MAX];
    int dtype;
    double value; /* _full's; _zeros and _ones have none and take it from the definition */
};

static const char *const dtype_choices[] = {"bfloat16", "bool",  "float16", "float32", "float64",
                                            "int32",    "int64", "int8",    "uint8",   NULL};
enum { DTYPE_FLOAT32 = 3 };

#define FP struct fill_param
#define FILL_COMMON_PARAMS                                                                    \
    MXC__P_TUPLE(FP, shape, "()",                                                             \
                 "output shape; 0 (or no dims) means unknown, inferred "                      \
                 "from the consumers"),                                                       \
        MXC__P_STRING(FP, ctx, "", "context of the output (ignored, as in MXNet's symbols)"), \
        MXC__P_ENUM(FP, dtype, "float32", dtype_choices, "output type (float32 only)")
static const struct mxc__param fill_params[] = {FILL_COMMON_PARAMS};
static const struct mxc__param full_params[] = {
    FILL_COMMON_PARAMS,
    MXC__P_DOUBLE(FP, value, NULL, "the value of every element"),
};
#undef FILL_COMMON_PARAMS
#undef FP

static const char *const fill_inputs[] = {NULL};
static const char *const fill_outputs[] = {"output", NULL};

/* float32, the type the operators compute in: else MXC_ENOTSUP naming the dtype. */
static int check_dtype(const char *op, const struct fill_param *p) {
    if (p->dtype == DTYPE_FLOAT32)
        return MXC_OK;
    return mxc__error(MXC_ENOTSUP, "%s: dtype=%s is not supported (float32 only)", op,
                      dtype_choices[p->dtype]);
}

/* The output takes the parameter's shape where that is fully known; otherwise it waits for
 * a consumer to give it one, which must have the same rank and agree on every known dim. */
static int fill_shape(const char *op, const struct fill_param *p, mxc_shape *out) {
    const mxc_shape *s = &p->shape;
    char b1[128], b2[128];
    int rc = check_dtype(op, p);
    if (rc != MXC_OK)
        return rc;
    bool complete = s->ndim > 0;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 0)
            return mxc__error(MXC_EINVAL, "%s: shape=%s has a negative dim", op,
                              mxc__shape_str(s, b1, sizeof b1));
        complete = complete && s->dims[i] > 0;
    }
    if (out[0].ndim == 0) {
        if (complete)
            out[0] = *s;
        return MXC_OK;
    }
    bool agree = s->ndim == 0 || s->ndim == out[0].ndim;
    for (int i = 0; agree && i < s->ndim; i++)
        agree = s->dims[i] == 0 || s->dims[i] == out[0].dims[i];
    if (agree)
        return MXC_OK;
    return mxc__error(MXC_ESHAPE, "%s: output has shape %s but shape=%s (0: unknown)", op,
                      mxc__shape_str(&out[0], b1, sizeof b1), mxc__shape_str(s, b2, sizeof b2));
}

static int fill_type(const char *op, const struct fill_param *p, int *out) {
    int rc = check_dtype(op, p);
    return rc != MXC_OK ? rc : mxc__type_assign(&out[0], MXC_FLOAT32, op, "output");
}

/* The fill's value: _full's parameter, or the definition's constant (0 or 1). */
static int fill_with(const struct mxc__op_call *c, double value) {
    const struct mxc__tensor *o = &c->out_data[0];
    float v = (float)value;
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    if (c->req[0] == MXC__REQ_ADD)
        return mxc__error(MXC_EINVAL, "fill: an add-to request on an output without inputs");
#ifdef MXC_USE_CUDA
    if (c->rctx->ctx.dev_type == MXC_GPU) {
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        return mxc__fill_gpu(o->data, o->size, (int)sizeof v, bits, c->rctx->stream);
    }
#endif
    float *d = o->data;
    for (int64_t i = 0; i < o->size; i++)
        d[i] = v;
    return MXC_OK;
}

/* One operator of the family: its name, its parameter table, its fill value. */
#define FILL_OP(ident, opname, desc, table, value_expr)                                     \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, \
                             int num_out, mxc_shape *aux, int num_aux) {                    \
        (void)in, (void)num_in, (void)num_out, (void)aux, (void)num_aux;                    \
        return fill_shape(opname, params, out);                                             \
    }                                                                                       \
    static int ident##_type(const void *params, int *in, int num_in, int *out, int num_out, \
                            int *aux, int num_aux) {                                        \
        (void)in, (void)num_in, (void)num_out, (void)aux, (void)num_aux;                    \
        return fill_type(opname, params, out);                                              \
    }                                                                                       \
    static int ident##_forward(const struct mxc__op_call *c) {                              \
        const struct fill_param *p = c->params;                                             \
        (void)p;                                                                            \
        return fill_with(c, value_expr);                                                    \
    }                                                                                       \
    const struct mxc__op_def mxc__op_##ident = {                                            \
        .name = opname,                                                                     \
        .description = desc,                                                                \
        .param_size = sizeof(struct fill_param),                                            \
        .params = table,                                                                    \
        .num_params = (int)MXC_ARRAY_SIZE(table),                                           \
        .inputs = fill_inputs,                                                              \
        .outputs = fill_outputs,                                                            \
        .infer_shape = ident##_shape,                                                       \
        .infer_type = ident##_type,                                                         \
        .forward_cpu = ident##_forward,                                                     \
        .forward_gpu = MXC__GPU(ident##_forward),                                           \
    };

FILL_OP(_zeros, "_zeros", "an array of zeros of the given shape", fill_params, 0.0)
FILL_OP(_ones, "_ones", "an array of ones of the given shape", fill_params, 1.0)
FILL_OP(_full, "_full", "an array of the given shape holding value", full_params, p->value)
