/*
 * operator/lrn.c — LRN, local response normalisation across channels (AlexNet), as MXNet
 * 1.9.1 computes it (operator/lrn_math.h has the formulas, shared with the GPU kernels in
 * operator/lrn_gpu.cu). data (N, C, H, W) -> output like data, and the hidden output
 * tmp_norm (like data) that the backward reads. Each output mixes neighbouring channels,
 * so nothing runs in place.
 */
#include "operator/gpu.h"
#include "operator/lrn_math.h"
#include "operator/op.h"

#define LP struct lrn_param
static const struct mxc__param lrn_params[] = {
    MXC__P_FLOAT(LP, alpha, "0.0001", 1, 0, "variance scaling"),
    MXC__P_FLOAT(LP, beta, "0.75", 1, 0, "power of the normaliser"),
    MXC__P_FLOAT(LP, knorm, "2", 1, 0, "added to the scaled sum of squares"),
    MXC__P_INT(LP, nsize, NULL, 1, 2147483647, "channels in the window (odd)"),
};
#undef LP

static const char *const lrn_inputs[] = {"data", NULL};
static const char *const lrn_outputs[] = {"output", "tmp_norm", NULL};

/* data (N, C, H, W) -> output, tmp_norm like data. MXNet's kernel takes 4-D data and an
 * odd window only. */
static int lrn_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    const struct lrn_param *p = params;
    char buf[128];
    int rc = MXC_OK;
    (void)num_in, (void)aux, (void)num_aux;
    MXC_CHECK(p->nsize % 2 == 1, MXC_EINVAL, "LRN: nsize must be odd, got %d", p->nsize);
    MXC_TRY(mxc__shape_assign(&in[0], &out[0], "LRN", "data"));
    MXC_CHECK(in[0].ndim == 0 || in[0].ndim == 4, MXC_EINVAL,
              "LRN: data must be 4-D (N, C, H, W), got %s",
              mxc__shape_str(&in[0], buf, sizeof buf));
    for (int k = 0; k < num_out; k++)
        MXC_TRY(mxc__shape_assign(&out[k], &in[0], "LRN", lrn_outputs[k]));
fail:
    return rc;
}

static struct mxc__lrn_view lrn_view(const struct mxc__op_call *c) {
    const mxc_shape *s = &c->in_data[0].shape;
    const struct lrn_param *p = c->params;
    return (struct mxc__lrn_view){s->dims[1], s->dims[2] * s->dims[3], p->nsize / 2};
}

/* The channel of element `at`. */
static inline int64_t channel_of(int64_t at, struct mxc__lrn_view v) {
    return at / v.inner % v.channels;
}

static int lrn_forward(const struct mxc__op_call *c) {
    const struct lrn_param *p = c->params;
    const struct mxc__lrn_view v = lrn_view(c);
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data, *norm = c->out_data[1].data;
    const int64_t n = c->in_data[0].size;
    /* tmp_norm first: the backward needs it even when nobody wants the output */
    for (int64_t i = 0; i < n; i++)
        norm[i] = mxc__lrn_norm(x, i, channel_of(i, v), v, p);
    for (int64_t i = 0; i < n && c->req[0] != MXC__REQ_NULL; i++) {
        const float o = x[i] * powf(norm[i], -p->beta);
        y[i] = c->req[0] == MXC__REQ_ADD ? y[i] + o : o;
    }
    return MXC_OK;
}

static int lrn_backward(const struct mxc__op_call *c) {
    const struct lrn_param *p = c->params;
    const struct mxc__lrn_view v = lrn_view(c);
    const float *x = c->in_data[0].data, *norm = c->out_data[1].data;
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data;
    const int64_t n = c->in_data[0].size;
    for (int64_t i = 0; i < n && c->req[0] != MXC__REQ_NULL; i++) {
        const float g = mxc__lrn_dx(x, dy, norm, i, channel_of(i, v), v, p);
        dx[i] = c->req[0] == MXC__REQ_ADD ? dx[i] + g : g;
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__lrn_forward_gpu(const struct mxc__op_call *c);  /* lrn_gpu.cu */
int mxc__lrn_backward_gpu(const struct mxc__op_call *c); /* lrn_gpu.cu */
#endif

const struct mxc__op_def mxc__op_LRN = {
    .name = "LRN",
    .description = "local response normalisation across channels (AlexNet)",
    .param_size = sizeof(struct lrn_param),
    .params = lrn_params,
    .num_params = (int)MXC_ARRAY_SIZE(lrn_params),
    .inputs = lrn_inputs,
    .outputs = lrn_outputs,
    .num_visible_outputs = 1,
    .infer_shape = lrn_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA,
    .forward_cpu = lrn_forward,
    .backward_cpu = lrn_backward,
    .forward_gpu = MXC__GPU(mxc__lrn_forward_gpu),
    .backward_gpu = MXC__GPU(mxc__lrn_backward_gpu),
};
