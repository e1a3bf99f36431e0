/*
 * operator/pad.c — Pad as MXNet 1.9.1 has it: 4-D (N, C, H, W) or 5-D (N, C, D, H, W) data,
 * no padding on N and C, pad_width (before, after) for every axis in order, and the modes
 * constant (constant_value), edge (repeat the border) and reflect (mirror without repeating
 * it; each pad smaller than its axis). Negative pads, which MXNet lets crop, are refused.
 * The indexing is operator/pad_math.h, shared with the GPU kernels (operator/pad_gpu.cu);
 * the backward gathers, for each input element, the gradients of every output it fed.
 */
#include "operator/gpu.h"
#include "operator/op.h"
#include "operator/pad_math.h"

struct pad_param {
    int mode;
    struct mxc__long_tuple pad_width;
    double constant_value;
};

static const char *const pad_modes[] = {"constant", "edge", "reflect", NULL};
#define PP struct pad_param
static const struct mxc__param pad_params[] = {
    MXC__P_ENUM(PP, mode, "constant", pad_modes, "how the padding is filled"),
    MXC__P_LONG_TUPLE(PP, pad_width, NULL,
                      "(before, after) for every axis in order; 0 for the first two"),
    MXC__P_DOUBLE(PP, constant_value, "0", "the value of constant padding"),
};
#undef PP

static const char *const pad_inputs[] = {"data", NULL};
static const char *const pad_outputs[] = {"output", NULL};

/* data (N, C, [D,] H, W) -> output with each axis grown by its two pads. */
static int pad_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    const struct pad_param *p = params;
    const mxc_shape *s = &in[0];
    char buf[128];
    int rc = MXC_OK;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    if (s->ndim == 0)
        return MXC_OK;
    MXC_CHECK(s->ndim == 4 || s->ndim == 5, MXC_EINVAL, "Pad: data must be 4-D or 5-D, got %s",
              mxc__shape_str(s, buf, sizeof buf));
    MXC_CHECK(p->pad_width.ndim == 2 * s->ndim, MXC_EINVAL,
              "Pad: pad_width has %d values, data %s needs %d (two per axis)", p->pad_width.ndim,
              mxc__shape_str(s, buf, sizeof buf), 2 * s->ndim);
    mxc_shape o = *s;
    for (int d = 0; d < s->ndim; d++) {
        const int64_t b = p->pad_width.dims[2 * d], a = p->pad_width.dims[2 * d + 1];
        MXC_CHECK(d >= 2 || (a == 0 && b == 0), MXC_EINVAL,
                  "Pad: axis %d (N or C) cannot be padded, pad_width gives (%lld, %lld)", d,
                  (long long)b, (long long)a);
        MXC_CHECK(a >= 0 && b >= 0, MXC_EINVAL, "Pad: axis %d has a negative pad (%lld, %lld)", d,
                  (long long)b, (long long)a);
        MXC_CHECK(p->mode != PAD_REFLECT || (b < s->dims[d] && a < s->dims[d]), MXC_EINVAL,
                  "Pad: reflect needs pads smaller than the axis: axis %d of size %lld, pads "
                  "(%lld, %lld)",
                  d, (long long)s->dims[d], (long long)b, (long long)a);
        MXC_CHECK(p->mode != PAD_EDGE || s->dims[d] > 0 || a + b == 0, MXC_EINVAL,
                  "Pad: edge padding of the empty axis %d", d);
        int64_t t;
        MXC_CHECK(mxc__mul_add(s->dims[d], a, 1, &t) && mxc__mul_add(t, b, 1, &o.dims[d]),
                  MXC_EINVAL, "Pad: axis %d of size %lld padded by (%lld, %lld) overflows", d,
                  (long long)s->dims[d], (long long)b, (long long)a);
    }
    MXC_CHECK(mxc_shape_size(&o) >= 0, MXC_EINVAL, "Pad: the output %s has too many elements",
              mxc__shape_str(&o, buf, sizeof buf));
    MXC_TRY(mxc__shape_assign(&out[0], &o, "Pad", "output"));
fail:
    return rc;
}

/* The view for data of shape s (data's, or its gradient's in the backward). */
static struct mxc__pad_view pad_view(const struct mxc__op_call *c, const mxc_shape *s) {
    const struct pad_param *p = c->params;
    struct mxc__pad_view v = {
        .planes = s->dims[0] * s->dims[1], .mode = p->mode, .value = (float)p->constant_value};
    const int first = s->ndim - 3; /* the D axis, or -1: depth 1 without padding */
    for (int k = 0; k < 3; k++) {
        const int d = first + k;
        v.in[k] = d >= 2 ? s->dims[d] : 1;
        v.before[k] = d >= 2 ? p->pad_width.dims[2 * d] : 0;
        v.out[k] = d >= 2 ? s->dims[d] + v.before[k] + p->pad_width.dims[2 * d + 1] : 1;
    }
    return v;
}

static int pad_forward(const struct mxc__op_call *c) {
    const struct mxc__pad_view v = pad_view(c, &c->in_data[0].shape);
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    const int req = c->req[0];
    for (int64_t e = 0; e < c->out_data[0].size && req != MXC__REQ_NULL; e++) {
        const float o = mxc__pad_value(x, e, &v);
        y[e] = req == MXC__REQ_ADD ? y[e] + o : o;
    }
    return MXC_OK;
}

static int pad_backward(const struct mxc__op_call *c) {
    const struct mxc__pad_view v = pad_view(c, &c->in_grad[0].shape);
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data;
    const int req = c->req[0];
    for (int64_t e = 0; e < c->in_grad[0].size && req != MXC__REQ_NULL; e++) {
        const float g = mxc__pad_grad(dy, e, &v);
        dx[e] = req == MXC__REQ_ADD ? dx[e] + g : g;
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__pad_forward_gpu(const struct mxc__op_call *c, const struct mxc__pad_view *v);
int mxc__pad_backward_gpu(const struct mxc__op_call *c, const struct mxc__pad_view *v);
static int pad_forward_gpu(const struct mxc__op_call *c) {
    struct mxc__pad_view v = pad_view(c, &c->in_data[0].shape);
    return mxc__pad_forward_gpu(c, &v);
}
static int pad_backward_gpu(const struct mxc__op_call *c) {
    struct mxc__pad_view v = pad_view(c, &c->in_grad[0].shape);
    return mxc__pad_backward_gpu(c, &v);
}
#endif

const struct mxc__op_def mxc__op_Pad = {
    .name = "Pad",
    .description = "pads the spatial axes of 4-D or 5-D data: constant, edge or reflect",
    .param_size = sizeof(struct pad_param),
    .params = pad_params,
    .num_params = (int)MXC_ARRAY_SIZE(pad_params),
    .inputs = pad_inputs,
    .outputs = pad_outputs,
    .infer_shape = pad_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = pad_forward,
    .backward_cpu = pad_backward,
    .forward_gpu = MXC__GPU(pad_forward_gpu),
    .backward_gpu = MXC__GPU(pad_backward_gpu),
};
