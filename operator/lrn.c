/*
 * operator/lrn.c — LRN, local response normalisation across channels (AlexNet), as MXNet
 * 1.9.1 computes it (operator/lrn_math.h has the formulas, shared with the GPU kernels in
 * operator/lrn_gpu.cu). data (N, C, H, W) -> output like data, and the hidden output
 * tmp_norm (like data) that the backward reads. Each output mixes neighbouring channels,
 * so nothing runs in place.
 */
#include "operator/cudnn_desc.h"
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
int mxc__lrn_norm_gpu(const struct mxc__op_call *c);     /* lrn_gpu.cu: tmp_norm only */
int mxc__lrn_forward_gpu(const struct mxc__op_call *c);  /* lrn_gpu.cu */
int mxc__lrn_backward_gpu(const struct mxc__op_call *c); /* lrn_gpu.cu */

#ifdef MXC_USE_CUDNN
/* LRN through cuDNN (CUDNN_LRN_CROSS_CHANNEL_DIM1), whose formula is MXNet's: y = x /
 * (k + alpha / n * sum of x² over the n channels around)^beta, the window symmetric for an
 * odd n. Forward: tmp_norm by the own kernel (cuDNN does not give it; the CPU writes it),
 * then y (req) by cuDNN; backward: dx (req) from x, y and dy. MXC__DNN_OWN outside cuDNN's
 * limits: nsize above CUDNN_LRN_MAX_N, knorm below CUDNN_LRN_MIN_K, beta below
 * CUDNN_LRN_MIN_BETA, sizes beyond int, anything its descriptor refuses. */
static int lrn_dnn(const struct mxc__op_call *c, bool backward) {
    const struct lrn_param *p = c->params;
    const int req = c->req[0];
    if (p->nsize < CUDNN_LRN_MIN_N || p->nsize > CUDNN_LRN_MAX_N || p->knorm < CUDNN_LRN_MIN_K ||
        p->beta < CUDNN_LRN_MIN_BETA)
        return MXC__DNN_OWN;
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_LRN;
    k.p[0] = p->nsize;
    k.f[0] = p->alpha, k.f[1] = p->beta, k.f[2] = p->knorm;
    const struct mxc__dnn *d;
    void *h;
    int rc = mxc__dnn_dims(k.x, c->in_data[0].shape.dims, 4) ? mxc__dnn_get(c->rctx, &k, &d, &h)
                                                             : MXC__DNN_OWN;
    if (rc == MXC_OK && !backward)
        rc = mxc__lrn_norm_gpu(c);
    if (rc != MXC_OK || req == MXC__REQ_NULL)
        return rc;
    const float one = 1.0f, beta = mxc__dnn_beta(req);
    const void *x = c->in_data[0].data, *y = c->out_data[0].data;
    if (!backward)
        return mxc__dnn_status(cudnnLRNCrossChannelForward(h, d->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                           &one, d->x, x, &beta, d->x,
                                                           c->out_data[0].data),
                               "LRN", "cudnnLRNCrossChannelForward");
    return mxc__dnn_status(cudnnLRNCrossChannelBackward(h, d->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                        &one, d->x, y, d->x, c->out_grad[0].data,
                                                        d->x, x, &beta, d->x, c->in_grad[0].data),
                           "LRN", "cudnnLRNCrossChannelBackward");
}
#endif

/* cuDNN where it takes the problem (a build with USE_CUDNN), else the own kernels. */
MXC__DNN_KERNEL(lrn_forward_gpu, lrn_dnn(c, false), mxc__lrn_forward_gpu)
MXC__DNN_KERNEL(lrn_backward_gpu, lrn_dnn(c, true), mxc__lrn_backward_gpu)
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
    .forward_gpu = MXC__GPU(lrn_forward_gpu),
    .backward_gpu = MXC__GPU(lrn_backward_gpu),
};
