/*
 * operator/softmax.c — softmax, log_softmax and the SoftmaxOutput loss.
 *
 * softmax / log_softmax are ordinary differentiable operators along one axis (default
 * the last), with an optional temperature T: y = exp((x - max) / T) / sum, computed after
 * subtracting the maximum so large inputs do not overflow. SoftmaxOutput is a loss: its
 * forward is a softmax (over the flattened trailing axes, the last axis with
 * preserve_shape, or axis 1 with multi_output), and its backward ignores the head
 * gradient and starts the chain with (softmax - one_hot(label)) * grad_scale / normaliser,
 * as MXNet 1.9.1 does (label smoothing, ignored labels, probability labels of data's
 * shape). All three views of the data are (outer, n, inner) with the softmax along n;
 * one pair of kernels (softmax_block / softmax_grad_block) serves every operator, and one
 * pair on a GPU (operator/softmax_gpu.cu), the arithmetic shared through operator/softmax.h.
 * float32, row-major.
 */
#include "operator/softmax.h"

#include "operator/cudnn_desc.h"
#include "operator/gpu.h"
#include "operator/op.h"

#include <math.h>
#include <string.h>

/* ---- Shared kernels ------------------------------------------------------------------ */

/* x, y: (outer, n, inner), n >= 1; softmax (or log-softmax) along n, temperature t.
 * tmp: 2 * inner floats. y may be x (each element is read before it is written). */
static void softmax_block(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                          float t, bool log_out, float *tmp) {
    float *mx = tmp, *sum = tmp + inner;
    for (int64_t o = 0; o < outer; o++) {
        const float *xb = x + o * n * inner;
        float *yb = y + o * n * inner;
        memcpy(mx, xb, (size_t)inner * sizeof(float));
        for (int64_t c = 1; c < n; c++)
            for (int64_t i = 0; i < inner; i++)
                mx[i] = fmaxf(mx[i], xb[c * inner + i]);
        memset(sum, 0, (size_t)inner * sizeof(float));
        if (log_out) {
            /* y = (x - max) / t - log(sum exp((x - max) / t)) */
            for (int64_t c = 0; c < n; c++)
                for (int64_t i = 0; i < inner; i++)
                    sum[i] += mxc__softmax_exp(xb[c * inner + i], mx[i], t);
            for (int64_t i = 0; i < inner; i++)
                sum[i] = logf(sum[i]);
            for (int64_t c = 0; c < n; c++)
                for (int64_t i = 0; i < inner; i++)
                    yb[c * inner + i] = mxc__log_softmax_of(xb[c * inner + i], mx[i], t, sum[i]);
        } else {
            for (int64_t c = 0; c < n; c++)
                for (int64_t i = 0; i < inner; i++) {
                    float e = mxc__softmax_exp(xb[c * inner + i], mx[i], t);
                    yb[c * inner + i] = e;
                    sum[i] += e;
                }
            for (int64_t i = 0; i < inner; i++)
                sum[i] = 1.0f / sum[i];
            for (int64_t c = 0; c < n; c++)
                for (int64_t i = 0; i < inner; i++)
                    yb[c * inner + i] *= sum[i];
        }
    }
}

/* Forward for a (outer, n, inner) view honouring req: writes straight into out (in place
 * allowed), or through temp space when adding. */
static int softmax_forward_req(const struct mxc__op_call *c, int64_t outer, int64_t n,
                               int64_t inner, float t, bool log_out) {
    int req = c->req[0];
    if (req == MXC__REQ_NULL || outer * n * inner == 0)
        return MXC_OK;
    int64_t block = req == MXC__REQ_ADD ? outer * n * inner : 0;
    float *tmp;
    int rc = mxc__resource_temp(c->resources[0], (size_t)(2 * inner + block) * sizeof(float),
                                (void **)&tmp);
    if (rc != MXC_OK)
        return rc;
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    if (req != MXC__REQ_ADD) {
        softmax_block(x, y, outer, n, inner, t, log_out, tmp);
        return MXC_OK;
    }
    float *yt = tmp + 2 * inner;
    softmax_block(x, yt, outer, n, inner, t, log_out, tmp);
    for (int64_t i = 0; i < block; i++)
        y[i] += yt[i];
    return MXC_OK;
}

/* dx (+)= softmax gradient along n of (outer, n, inner) tensors, temperature t:
 *   softmax:     dx = y * (g - sum_n(g * y)) / t
 *   log_softmax: dx = (g - exp(y) * sum_n(g)) / t
 * tmp: inner floats. dx may be g when not adding (the sums are taken first). */
static void softmax_grad_block(const float *y, const float *g, float *dx, int64_t outer, int64_t n,
                               int64_t inner, float t, bool log_out, bool add, float *tmp) {
    for (int64_t o = 0; o < outer; o++) {
        const float *yb = y + o * n * inner, *gb = g + o * n * inner;
        float *db = dx + o * n * inner;
        memset(tmp, 0, (size_t)inner * sizeof(float));
        for (int64_t c = 0; c < n; c++)
            for (int64_t i = 0; i < inner; i++)
                tmp[i] += mxc__softmax_grad_term(yb[c * inner + i], gb[c * inner + i], log_out);
        for (int64_t c = 0; c < n; c++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = c * inner + i;
                float v = mxc__softmax_grad(yb[k], gb[k], tmp[i], t, log_out);
                db[k] = add ? db[k] + v : v;
            }
    }
}

/* ---- softmax / log_softmax ----------------------------------------------------------- */

struct softmax_param {
    int axis;
    struct mxc__opt_float temperature;
};

static const struct mxc__param softmax_params[] = {
    MXC__P_INT(struct softmax_param, axis, "-1", 1, 0, "the axis to normalise along"),
    MXC__P_OPT_FLOAT(struct softmax_param, temperature, "divides the input (None: 1)"),
};

static const char *const data_inputs[] = {"data", NULL};
static const char *const output_outputs[] = {"output", NULL};

/* data: any shape; output: the same. Checks the axis and the temperature. */
static int softmax_shape_common(const void *params, mxc_shape *in, mxc_shape *out, const char *op) {
    const struct softmax_param *p = params;
    char buf[128];
    if (p->temperature.has_value && !(p->temperature.value > 0))
        return mxc__error(MXC_EINVAL, "%s: temperature must be positive, got %g", op,
                          (double)p->temperature.value);
    int rc = mxc__shape_assign(&in[0], &out[0], op, "data");
    if (rc == MXC_OK)
        rc = mxc__shape_assign(&out[0], &in[0], op, "output");
    if (rc != MXC_OK || in[0].ndim == 0)
        return rc;
    if (p->axis < -in[0].ndim || p->axis >= in[0].ndim)
        return mxc__error(MXC_EINVAL, "%s: axis %d is out of range for data of shape %s", op,
                          p->axis, mxc__shape_str(&in[0], buf, sizeof buf));
    return MXC_OK;
}

static int softmax_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    return softmax_shape_common(params, in, out, "softmax");
}

static int log_softmax_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                             int num_out, mxc_shape *aux, int num_aux) {
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    return softmax_shape_common(params, in, out, "log_softmax");
}

/* shape as (outer, n, inner) around the softmax axis */
static void axis_dims(const struct softmax_param *p, const mxc_shape *s, int64_t *outer, int64_t *n,
                      int64_t *inner) {
    int axis = p->axis < 0 ? p->axis + s->ndim : p->axis;
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= s->dims[i];
    for (int i = axis + 1; i < s->ndim; i++)
        *inner *= s->dims[i];
    *n = s->dims[axis];
}

static float temperature_of(const struct softmax_param *p) {
    return p->temperature.has_value ? p->temperature.value : 1.0f;
}

static int softmax_fwd(const struct mxc__op_call *c, bool log_out) {
    const struct softmax_param *p = c->params;
    int64_t outer, n, inner;
    axis_dims(p, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_forward_req(c, outer, n, inner, temperature_of(p), log_out);
}

/* Backward for a (outer, n, inner) view: reads out_grad and the output (y). */
static int softmax_backward_view(const struct mxc__op_call *c, int64_t outer, int64_t n,
                                 int64_t inner, float t, bool log_out) {
    int req = c->req[0];
    const struct mxc__tensor *y = &c->out_data[0];
    if (req == MXC__REQ_NULL || y->size == 0)
        return MXC_OK;
    float *tmp;
    int rc = mxc__resource_temp(c->resources[0], (size_t)inner * sizeof(float), (void **)&tmp);
    if (rc != MXC_OK)
        return rc;
    softmax_grad_block(y->data, c->out_grad[0].data, c->in_grad[0].data, outer, n, inner, t,
                       log_out, req == MXC__REQ_ADD, tmp);
    return MXC_OK;
}

/* in: any shape */
static int softmax_bwd(const struct mxc__op_call *c, bool log_out) {
    const struct softmax_param *p = c->params;
    int64_t outer, n, inner;
    axis_dims(p, &c->out_data[0].shape, &outer, &n, &inner);
    return softmax_backward_view(c, outer, n, inner, temperature_of(p), log_out);
}

#ifdef MXC_USE_CUDA
#ifdef MXC_USE_CUDNN
/* The softmax (log_out: log_softmax) of the (outer, n, inner) view through cuDNN: one
 * (outer, n, inner, 1) tensor in CUDNN_SOFTMAX_MODE_CHANNEL (along n at each (outer,
 * inner)), CUDNN_SOFTMAX_ACCURATE (the maximum subtracted, as the own kernels do) or
 * CUDNN_SOFTMAX_LOG. Forward when dy is NULL: out (req) = softmax of in (x); backward: out
 * (req) = dx from in (y) and dy. MXC__DNN_OWN for what cuDNN does not express or promise:
 * a temperature other than 1, an empty view or one beyond int, and an output over its
 * input (y over x, dx over dy), which cuDNN's reference does not allow in writing. */
static int softmax_dnn(const struct mxc__op_call *c, const void *in, const void *dy, void *out,
                       const int64_t view[3], float t, bool log_out) {
    const int req = c->req[0];
    const char *op = log_out ? "log_softmax" : "softmax";
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_TENSOR;
    const int64_t dims[4] = {view[0], view[1], view[2], 1};
    if (t != 1.0f || out == in || out == dy || !mxc__dnn_dims(k.x, dims, 4))
        return MXC__DNN_OWN;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const struct mxc__dnn *d;
    void *h;
    int rc = mxc__dnn_get(c->rctx, &k, &d, &h);
    if (rc != MXC_OK)
        return rc;
    const float one = 1.0f, beta = mxc__dnn_beta(req);
    const cudnnSoftmaxAlgorithm_t algo = log_out ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
    if (dy == NULL)
        return mxc__dnn_status(cudnnSoftmaxForward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d->x,
                                                   in, &beta, d->x, out),
                               op, "cudnnSoftmaxForward");
    return mxc__dnn_status(cudnnSoftmaxBackward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d->x, in,
                                                d->x, dy, &beta, d->x, out),
                           op, "cudnnSoftmaxBackward");
}
#endif

/* Forward: y (req) = softmax (log_softmax) of x along n of the (outer, n, inner) view,
 * temperature t; backward: dx (req) from y and dy. cuDNN where it takes the problem (a
 * build with USE_CUDNN), else the own kernels. */
static int softmax_gpu(const struct mxc__op_call *c, int64_t outer, int64_t n, int64_t inner,
                       float t, bool log_out, bool backward) {
    const void *x = c->in_data[0].data, *y = c->out_data[0].data;
    const void *dy = backward ? c->out_grad[0].data : NULL;
    void *out = backward ? c->in_grad[0].data : c->out_data[0].data;
#ifdef MXC_USE_CUDNN
    int rc =
        softmax_dnn(c, backward ? y : x, dy, out, (const int64_t[]){outer, n, inner}, t, log_out);
    if (rc != MXC__DNN_OWN)
        return rc;
#endif
    if (!backward)
        return mxc__softmax_gpu(x, out, outer, n, inner, t, log_out, c->req[0], c->rctx->stream);
    return mxc__softmax_grad_gpu(y, dy, out, outer, n, inner, t, log_out, c->req[0],
                                 c->rctx->stream);
}
#endif

#ifdef MXC_USE_CUDA
static int softmax_fwd_gpu(const struct mxc__op_call *c, bool log_out) {
    const struct softmax_param *p = c->params;
    int64_t outer, n, inner;
    axis_dims(p, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_gpu(c, outer, n, inner, temperature_of(p), log_out, false);
}

static int softmax_bwd_gpu(const struct mxc__op_call *c, bool log_out) {
    const struct softmax_param *p = c->params;
    int64_t outer, n, inner;
    axis_dims(p, &c->out_data[0].shape, &outer, &n, &inner);
    return softmax_gpu(c, outer, n, inner, temperature_of(p), log_out, true);
}

static int softmax_forward_gpu(const struct mxc__op_call *c) { return softmax_fwd_gpu(c, false); }
static int softmax_backward_gpu(const struct mxc__op_call *c) { return softmax_bwd_gpu(c, false); }
static int log_softmax_forward_gpu(const struct mxc__op_call *c) {
    return softmax_fwd_gpu(c, true);
}
static int log_softmax_backward_gpu(const struct mxc__op_call *c) {
    return softmax_bwd_gpu(c, true);
}
#endif

static int softmax_forward(const struct mxc__op_call *c) { return softmax_fwd(c, false); }
static int softmax_backward(const struct mxc__op_call *c) { return softmax_bwd(c, false); }
static int log_softmax_forward(const struct mxc__op_call *c) { return softmax_fwd(c, true); }
static int log_softmax_backward(const struct mxc__op_call *c) { return softmax_bwd(c, true); }

const struct mxc__op_def mxc__op_softmax = {
    .name = "softmax",
    .description = "exp((x - max) / T) / sum along an axis",
    .param_size = sizeof(struct softmax_param),
    .params = softmax_params,
    .num_params = (int)MXC_ARRAY_SIZE(softmax_params),
    .inputs = data_inputs,
    .outputs = output_outputs,
    .infer_shape = softmax_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = softmax_forward,
    .backward_cpu = softmax_backward,
    .forward_gpu = MXC__GPU(softmax_forward_gpu),
    .backward_gpu = MXC__GPU(softmax_backward_gpu),
};

const struct mxc__op_def mxc__op_log_softmax = {
    .name = "log_softmax",
    .description = "(x - max) / T - log(sum exp((x - max) / T)) along an axis",
    .param_size = sizeof(struct softmax_param),
    .params = softmax_params,
    .num_params = (int)MXC_ARRAY_SIZE(softmax_params),
    .inputs = data_inputs,
    .outputs = output_outputs,
    .infer_shape = log_softmax_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = log_softmax_forward,
    .backward_cpu = log_softmax_backward,
    .forward_gpu = MXC__GPU(log_softmax_forward_gpu),
    .backward_gpu = MXC__GPU(log_softmax_backward_gpu),
};

/* ---- SoftmaxOutput --------------------------------------------------------------------- */

enum { NORM_NULL, NORM_BATCH, NORM_VALID };

struct softmax_output_param {
    float grad_scale;
    float ignore_label;
    bool multi_output;
    bool use_ignore;
    bool preserve_shape;
    int normalization;
    bool out_grad;
    float smooth_alpha;
};

static const char *const norm_choices[] = {"null", "batch", "valid", NULL};

#define SP struct softmax_output_param
static const struct mxc__param softmax_output_params[] = {
    MXC__P_FLOAT(SP, grad_scale, "1", 1, 0, "scales the gradient"),
    MXC__P_FLOAT(SP, ignore_label, "-1", 1, 0, "the label whose rows get no gradient"),
    MXC__P_BOOL(SP, multi_output, "False", "softmax along axis 1 of (N, C, ...), labels (N, ...)"),
    MXC__P_BOOL(SP, use_ignore, "False", "zero the gradient of rows labelled ignore_label"),
    MXC__P_BOOL(SP, preserve_shape, "False", "softmax along the last axis only"),
    MXC__P_ENUM(SP, normalization, "null", norm_choices,
                "divide the gradient by 1 (null), the batch size or the valid labels"),
    MXC__P_BOOL(SP, out_grad, "False", "multiply by the head gradient (not supported)"),
    MXC__P_FLOAT(SP, smooth_alpha, "0", 0, 1, "label smoothing: 1 - alpha on the label"),
};
#undef SP

static const char *const so_inputs[] = {"data", "label", NULL};

/* The softmax of data as (outer, n, inner), along n:
 *   multi_output:   (d0, d1, rest)
 *   preserve_shape: (size / last, last, 1)
 *   otherwise:      (d0, size / d0, 1), data flattened to 2-D as MXNet does. */
static void so_dims(const struct softmax_output_param *p, const mxc_shape *s, int64_t *outer,
                    int64_t *n, int64_t *inner) {
    int64_t size = mxc_shape_size(s);
    if (p->multi_output) {
        *outer = s->dims[0];
        *n = s->dims[1];
        *inner = *outer * *n != 0 ? size / (*outer * *n) : 0;
    } else if (p->preserve_shape) {
        *n = s->dims[s->ndim - 1];
        *outer = *n ? size / *n : 0;
        *inner = 1;
    } else {
        *outer = s->dims[0];
        *n = *outer ? size / *outer : 0;
        *inner = 1;
    }
}

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* data (N, ...) <-> output (same); label deduced from data: data's shape without the last
 * axis, or (N, size / N / C) with multi_output (which also accepts (N, d2, ...) and
 * (N, 1, d2, ...)); a label of data's shape holds probabilities. */
static int so_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct softmax_output_param *p = params;
    const char *op = "SoftmaxOutput";
    char a[128], b[128], d[128], e[128];
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    if (p->out_grad)
        return mxc__error(MXC_ENOTSUP,
                          "%s: out_grad=True is not supported (the loss starts "
                          "the gradient chain)",
                          op);
    int rc = mxc__shape_assign(&in[0], &out[0], op, "data");
    if (rc == MXC_OK)
        rc = mxc__shape_assign(&out[0], &in[0], op, "output");
    if (rc != MXC_OK || in[0].ndim == 0)
        return rc;
    const mxc_shape *ds = &in[0];
    if (ds->ndim < 2)
        return mxc__error(MXC_ESHAPE, "%s: data must have at least 2 dimensions, got %s", op,
                          mxc__shape_str(ds, d, sizeof d));
    if (same_shape(&in[1], ds))
        return MXC_OK; /* probability labels */
    if (!p->multi_output) {
        mxc_shape l = *ds;
        l.ndim--;
        return mxc__shape_assign(&in[1], &l, op, "label");
    }
    int64_t n0 = ds->dims[0], c = ds->dims[1], size = mxc_shape_size(ds);
    int64_t l1d[2] = {n0, n0 * c != 0 ? size / n0 / c : 0};
    mxc_shape l1 = mxc_shape_make(2, l1d), l2 = *ds, l3 = *ds;
    l2.ndim--;
    for (int i = 2; i < ds->ndim; i++)
        l2.dims[i - 1] = ds->dims[i];
    l3.dims[1] = 1;
    if (in[1].ndim == 0) {
        in[1] = l1;
        return MXC_OK;
    }
    if (same_shape(&in[1], &l1) || same_shape(&in[1], &l2) || same_shape(&in[1], &l3))
        return MXC_OK;
    return mxc__error(MXC_ESHAPE, "%s: label has shape %s, expected %s or %s (data %s)", op,
                      mxc__shape_str(&in[1], a, sizeof a), mxc__shape_str(&l1, b, sizeof b),
                      mxc__shape_str(&l2, d, sizeof d), mxc__shape_str(ds, e, sizeof e));
}

static int so_forward(const struct mxc__op_call *c) {
    const struct softmax_output_param *p = c->params;
    int64_t outer, n, inner;
    so_dims(p, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_forward_req(c, outer, n, inner, 1.0f, false);
}

/* dx (+)= v */
static inline void put(float *dx, int64_t k, float v, bool add) { dx[k] = add ? dx[k] + v : v; }

/* What the SoftmaxOutput gradient of one call needs besides the data. */
struct so_grad {
    int64_t outer, n, inner, ignore;
    float on, off; /* the target at the label and elsewhere */
    double norm;   /* the normaliser, but for normalization=valid (counted from the labels) */
};

static struct so_grad so_grad_of(const struct softmax_output_param *p, const mxc_shape *y,
                                 int64_t label_size) {
    struct so_grad g;
    so_dims(p, y, &g.outer, &g.n, &g.inner);
    g.ignore = mxc__label_class(p->ignore_label);
    g.norm = 1;
    if (p->normalization == NORM_BATCH)
        g.norm = (double)(p->multi_output ? g.outer : label_size);
    if (p->multi_output && p->normalization != NORM_VALID)
        g.norm *= (double)g.inner;
    g.on = 1.0f - p->smooth_alpha;
    g.off = g.n > 1 ? p->smooth_alpha / (float)(g.n - 1) : 0.0f;
    return g;
}

/* in_grad[0] (outer, n, inner) = (y - target) * scale; target: one-hot of the label at
 * (o, i) (1 - alpha on the label, alpha / (n - 1) elsewhere with smoothing); rows whose
 * label is ignore_label get 0 with use_ignore. in_grad[1] (the label) gets 0. */
static int so_backward(const struct mxc__op_call *c) {
    const struct softmax_output_param *p = c->params;
    const struct mxc__tensor *y = &c->out_data[0], *lab = &c->in_data[1];
    const float *yv = y->data, *lv = lab->data;
    float *dx = c->in_grad[0].data;
    int req = c->req[0];
    bool add = req == MXC__REQ_ADD;
    if (c->req[1] == MXC__REQ_WRITE || c->req[1] == MXC__REQ_INPLACE)
        memset(c->in_grad[1].data, 0, (size_t)lab->size * sizeof(float));
    if (req == MXC__REQ_NULL || y->size == 0)
        return MXC_OK;
    if (same_shape(&lab->shape, &y->shape)) { /* probability labels: no normaliser */
        for (int64_t k = 0; k < y->size; k++)
            put(dx, k, mxc__so_prob_grad(yv[k], lv[k], p->grad_scale), add);
        return MXC_OK;
    }
    struct so_grad g = so_grad_of(p, &y->shape, lab->size);
    if (p->normalization == NORM_VALID) {
        g.norm = 0;
        for (int64_t k = 0; k < lab->size; k++)
            g.norm += mxc__label_class(lv[k]) != g.ignore;
    }
    float scale = mxc__so_scale(p->grad_scale, g.norm);
    for (int64_t o = 0; o < g.outer; o++) {
        for (int64_t i = 0; i < g.inner; i++) {
            int64_t cls = mxc__label_class(lv[o * g.inner + i]);
            bool skip = p->use_ignore && cls == g.ignore;
            for (int64_t ch = 0; ch < g.n; ch++) {
                int64_t k = (o * g.n + ch) * g.inner + i;
                put(dx, k, mxc__so_grad(yv[k], ch, cls, skip, g.on, g.off, scale), add);
            }
        }
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
static int so_forward_gpu(const struct mxc__op_call *c) {
    const struct softmax_output_param *p = c->params;
    int64_t outer, n, inner;
    so_dims(p, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_gpu(c, outer, n, inner, 1.0f, false, false);
}

/* so_backward on a GPU; normalization=valid counts the labels on the device, into one
 * float of temp space, so nothing comes back to the host. */
static int so_backward_gpu(const struct mxc__op_call *c) {
    const struct softmax_output_param *p = c->params;
    const struct mxc__tensor *y = &c->out_data[0], *lab = &c->in_data[1];
    void *stream = c->rctx->stream;
    int req = c->req[0], rc;
    if (c->req[1] == MXC__REQ_WRITE || c->req[1] == MXC__REQ_INPLACE) {
        rc = mxc__gpu_memset0(c->in_grad[1].data, (size_t)lab->size * sizeof(float), stream);
        if (rc != MXC_OK)
            return rc;
    }
    if (req == MXC__REQ_NULL || y->size == 0)
        return MXC_OK;
    if (same_shape(&lab->shape, &y->shape))
        return mxc__so_prob_grad_gpu(y->data, lab->data, c->in_grad[0].data, y->size, p->grad_scale,
                                     req, stream);
    struct so_grad g = so_grad_of(p, &y->shape, lab->size);
    float *valid_scale = NULL;
    if (p->normalization == NORM_VALID) {
        rc = mxc__resource_temp(c->resources[0], sizeof(float), (void **)&valid_scale);
        if (rc != MXC_OK)
            return rc;
    }
    float scale = valid_scale ? p->grad_scale : mxc__so_scale(p->grad_scale, g.norm);
    return mxc__so_grad_gpu(y->data, lab->data, lab->size, c->in_grad[0].data, g.outer, g.n,
                            g.inner, g.ignore, p->use_ignore, g.on, g.off, scale, valid_scale, req,
                            stream);
}
#endif

const struct mxc__op_def mxc__op_SoftmaxOutput = {
    .name = "SoftmaxOutput",
    .description = "softmax forward; cross-entropy gradient against label backward",
    .param_size = sizeof(struct softmax_output_param),
    .params = softmax_output_params,
    .num_params = (int)MXC_ARRAY_SIZE(softmax_output_params),
    .inputs = so_inputs,
    .outputs = output_outputs,
    .infer_shape = so_shape,
    .backward_deps = MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA, /* a loss: no out_grad */
    .inplace = MXC__INPLACE(0, 0),
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1}, /* the GPU's count of valid labels */
    .forward_cpu = so_forward,
    .backward_cpu = so_backward,
    .forward_gpu = MXC__GPU(so_forward_gpu),
    .backward_gpu = MXC__GPU(so_backward_gpu),
};

/* ---- SoftmaxActivation ---------------------------------------------------------------- */

/* MXNet's older softmax: over the channels of each position (mode channel, data (N, C, ...)
 * with at least 3 axes), or, in mode instance, over the last axis of data flattened to 2-D
 * (N * ... , last): what MXNet 1.9.1's forward computes (for 2-D data, each instance). Its
 * backward for instance mode on data of more than 2 axes sums over axis 1 instead, which is
 * not the gradient of that forward; mxc's is (the references cover 2-D instances only).
 * The same kernels as softmax, on the (outer, n, inner) view the mode gives. */
struct softmax_act_param {
    int mode;
};

enum { SA_CHANNEL, SA_INSTANCE };
static const char *const sa_modes[] = {"channel", "instance", NULL};
static const struct mxc__param softmax_act_params[] = {
    MXC__P_ENUM(struct softmax_act_param, mode, "instance", sa_modes,
                "instance: over all but the first axis; channel: over axis 1"),
};

static int sa_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct softmax_act_param *p = params;
    char buf[128];
    int rc = MXC_OK;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    MXC_TRY(mxc__shape_assign(&in[0], &out[0], "SoftmaxActivation", "data"));
    MXC_TRY(mxc__shape_assign(&out[0], &in[0], "SoftmaxActivation", "output"));
    MXC_CHECK(p->mode != SA_CHANNEL || in[0].ndim == 0 || in[0].ndim >= 3, MXC_EINVAL,
              "SoftmaxActivation: mode channel needs data of at least 3 dimensions, got %s",
              mxc__shape_str(&in[0], buf, sizeof buf));
fail:
    return rc;
}

static void sa_dims(const struct mxc__op_call *c, const mxc_shape *s, int64_t *outer, int64_t *n,
                    int64_t *inner) {
    const struct softmax_act_param *p = c->params;
    if (p->mode == SA_CHANNEL) {
        axis_dims(&(struct softmax_param){.axis = 1}, s, outer, n, inner);
        return;
    }
    axis_dims(&(struct softmax_param){.axis = -1}, s, outer, n, inner);
}

static int sa_forward(const struct mxc__op_call *c) {
    int64_t outer, n, inner;
    sa_dims(c, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_forward_req(c, outer, n, inner, 1.0f, false);
}

static int sa_backward(const struct mxc__op_call *c) {
    int64_t outer, n, inner;
    sa_dims(c, &c->out_data[0].shape, &outer, &n, &inner);
    return softmax_backward_view(c, outer, n, inner, 1.0f, false);
}

#ifdef MXC_USE_CUDA
static int sa_forward_gpu(const struct mxc__op_call *c) {
    int64_t outer, n, inner;
    sa_dims(c, &c->in_data[0].shape, &outer, &n, &inner);
    return softmax_gpu(c, outer, n, inner, 1.0f, false, false);
}

static int sa_backward_gpu(const struct mxc__op_call *c) {
    int64_t outer, n, inner;
    sa_dims(c, &c->out_data[0].shape, &outer, &n, &inner);
    return softmax_gpu(c, outer, n, inner, 1.0f, false, true);
}
#endif

const struct mxc__op_def mxc__op_SoftmaxActivation = {
    .name = "SoftmaxActivation",
    .description = "softmax over each instance or over the channels of each position",
    .param_size = sizeof(struct softmax_act_param),
    .params = softmax_act_params,
    .num_params = (int)MXC_ARRAY_SIZE(softmax_act_params),
    .inputs = data_inputs,
    .outputs = output_outputs,
    .infer_shape = sa_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = sa_forward,
    .backward_cpu = sa_backward,
    .forward_gpu = MXC__GPU(sa_forward_gpu),
    .backward_gpu = MXC__GPU(sa_backward_gpu),
};
