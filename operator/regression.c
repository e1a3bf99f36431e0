/*
 * operator/regression.c — the regression losses LinearRegressionOutput,
 * LogisticRegressionOutput and MAERegressionOutput, one generic definition parameterised
 * by its forward transform and gradient (enum reg_kind):
 *   linear:   y = x,            dx = (y - label)       * grad_scale / m
 *   logistic: y = sigmoid(x),   dx = (y - label)       * grad_scale / m
 *   MAE:      y = x,            dx = sign(y - label)   * grad_scale / m
 * where m = label size / label.shape[0] (outputs per sample), as MXNet 1.9.1 divides.
 * The backward ignores the head gradient (a loss starts the chain) and gives the label a
 * zero gradient. data: any shape (N, ...); label: data's shape, or (N) for data (N, 1),
 * or any shape with the same first dimension and size. The per-element arithmetic lives in
 * operator/regression.h, shared with the GPU kernels (operator/regression_gpu.cu).
 * float32, row-major.
 */
#include "operator/regression.h"

#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

enum reg_kind {
    REG_LINEAR = MXC__REG_LINEAR,
    REG_LOGISTIC = MXC__REG_LOGISTIC,
    REG_MAE = MXC__REG_MAE
};

static const char *const reg_names[] = {"LinearRegressionOutput", "LogisticRegressionOutput",
                                        "MAERegressionOutput"};

struct reg_param {
    float grad_scale;
};

static const struct mxc__param reg_params[] = {
    MXC__P_FLOAT(struct reg_param, grad_scale, "1", 1, 0, "scales the gradient"),
};

static const char *const reg_inputs[] = {"data", "label", NULL};
static const char *const reg_outputs[] = {"output", NULL};

/* data <-> output (same shape); label from data: (N) for data (N, 1), else data's shape;
 * a given label needs data's first dimension and size. */
static int reg_shape(enum reg_kind kind, mxc_shape *in, mxc_shape *out) {
    const char *op = reg_names[kind];
    char a[128], b[128];
    int rc = mxc__shape_assign(&in[0], &out[0], op, "data");
    if (rc == MXC_OK)
        rc = mxc__shape_assign(&out[0], &in[0], op, "output");
    if (rc != MXC_OK || in[0].ndim == 0)
        return rc;
    const mxc_shape *d = &in[0];
    if (in[1].ndim == 0) {
        in[1] = *d;
        if (d->ndim == 2 && d->dims[1] == 1)
            in[1].ndim = 1;
        return MXC_OK;
    }
    if (in[1].dims[0] != d->dims[0] || mxc_shape_size(&in[1]) != mxc_shape_size(d))
        return mxc__error(MXC_ESHAPE,
                          "%s: label has shape %s, inconsistent with data %s (needs the "
                          "same first dimension and size)",
                          op, mxc__shape_str(&in[1], a, sizeof a), mxc__shape_str(d, b, sizeof b));
    return MXC_OK;
}

/* y (+)= f(x) elementwise; y may be x. */
static int reg_forward(const struct mxc__op_call *c, enum reg_kind kind) {
    int req = c->req[0];
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    int64_t n = c->in_data[0].size;
    if (kind != REG_LOGISTIC) {
        mxc__copy_req(y, x, n, req);
    } else if (req == MXC__REQ_ADD) {
        for (int64_t i = 0; i < n; i++)
            y[i] += mxc__reg_out(kind, x[i]);
    } else if (req != MXC__REQ_NULL) {
        for (int64_t i = 0; i < n; i++)
            y[i] = mxc__reg_out(kind, x[i]);
    }
    return MXC_OK;
}

/* The gradient's scale: grad_scale / (label size / label.shape[0]). */
static float reg_scale(const struct mxc__op_call *c) {
    const struct reg_param *p = c->params;
    const struct mxc__tensor *lab = &c->in_data[1];
    return p->grad_scale / ((float)lab->size / (float)lab->shape.dims[0]);
}

/* dx (+)= g(y - label) * grad_scale / m; label gradient 0. Reads label and y only. */
static int reg_backward(const struct mxc__op_call *c, enum reg_kind kind) {
    const struct mxc__tensor *lab = &c->in_data[1];
    const float *y = c->out_data[0].data, *l = lab->data;
    float *dx = c->in_grad[0].data;
    int64_t n = c->out_data[0].size;
    int req = c->req[0];
    if (c->req[1] == MXC__REQ_WRITE || c->req[1] == MXC__REQ_INPLACE)
        memset(c->in_grad[1].data, 0, (size_t)lab->size * sizeof(float));
    if (req == MXC__REQ_NULL || n == 0)
        return MXC_OK;
    float scale = reg_scale(c);
    bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++) {
        float v = mxc__reg_grad(kind, y[i], l[i], scale);
        dx[i] = add ? dx[i] + v : v;
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
static int reg_forward_gpu(const struct mxc__op_call *c, enum reg_kind kind) {
    return mxc__reg_forward_gpu(kind, c->in_data[0].data, c->out_data[0].data, c->in_data[0].size,
                                c->req[0], c->rctx->stream);
}

static int reg_backward_gpu(const struct mxc__op_call *c, enum reg_kind kind) {
    const struct mxc__tensor *lab = &c->in_data[1];
    int64_t n = c->out_data[0].size;
    if (c->req[1] == MXC__REQ_WRITE || c->req[1] == MXC__REQ_INPLACE) {
        int rc = mxc__gpu_memset0(c->in_grad[1].data, (size_t)lab->size * sizeof(float),
                                  c->rctx->stream);
        if (rc != MXC_OK)
            return rc;
    }
    if (c->req[0] == MXC__REQ_NULL || n == 0)
        return MXC_OK;
    return mxc__reg_backward_gpu(kind, c->out_data[0].data, lab->data, c->in_grad[0].data, n,
                                 reg_scale(c), c->req[0], c->rctx->stream);
}
#define REG_GPU(ident, kind)                                        \
    static int ident##_forward_gpu(const struct mxc__op_call *c) {  \
        return reg_forward_gpu(c, kind);                            \
    }                                                               \
    static int ident##_backward_gpu(const struct mxc__op_call *c) { \
        return reg_backward_gpu(c, kind);                           \
    }
#else
#define REG_GPU(ident, kind)
#endif

/* One definition per kind, all from the generic pieces above. */
#define REG_OP(ident, kind, desc)                                                               \
    REG_GPU(ident, kind)                                                                        \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,     \
                             int num_out, mxc_shape *aux, int num_aux) {                        \
        (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;                    \
        return reg_shape(kind, in, out);                                                        \
    }                                                                                           \
    static int ident##_forward(const struct mxc__op_call *c) { return reg_forward(c, kind); }   \
    static int ident##_backward(const struct mxc__op_call *c) { return reg_backward(c, kind); } \
    const struct mxc__op_def mxc__op_##ident = {                                                \
        .name = #ident,                                                                         \
        .description = desc,                                                                    \
        .param_size = sizeof(struct reg_param),                                                 \
        .params = reg_params,                                                                   \
        .num_params = (int)MXC_ARRAY_SIZE(reg_params),                                          \
        .inputs = reg_inputs,                                                                   \
        .outputs = reg_outputs,                                                                 \
        .infer_shape = ident##_shape,                                                           \
        .backward_deps = MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA, /* a loss: no out_grad */        \
        .inplace = MXC__INPLACE(0, 0),                                                          \
        .forward_cpu = ident##_forward,                                                         \
        .backward_cpu = ident##_backward,                                                       \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),                                           \
        .backward_gpu = MXC__GPU(ident##_backward_gpu),                                         \
    };

REG_OP(LinearRegressionOutput, REG_LINEAR, "identity forward; (out - label) backward")
REG_OP(LogisticRegressionOutput, REG_LOGISTIC, "sigmoid forward; (out - label) backward")
REG_OP(MAERegressionOutput, REG_MAE, "identity forward; sign(out - label) backward")
