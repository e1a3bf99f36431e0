/*
 * operator/upsampling.c — UpSampling with sample_type nearest, as MXNet 1.9.1 computes it:
 * num_args 4-D inputs (N, C, H, W); the output is the first input's size times `scale`,
 * each input repeated into it by output size / its own size (which must divide), the
 * inputs' channels concatenated (multi_input_mode concat) or summed (sum, equal channels).
 * The indexing is operator/upsampling_math.h, shared with operator/upsampling_gpu.cu.
 * sample_type bilinear is, as in MXNet, a Deconvolution of data with the input `weight`
 * (num_filter, 1, k, k), k = 2 scale - scale % 2, stride scale, pad ceil((scale - 1) / 2),
 * one group per channel, no bias: the kernels are Deconvolution's (operator/convolution.c),
 * called with those parameters.
 */
#include "operator/convolution.h"
#include "operator/gpu.h"
#include "operator/op.h"
#include "operator/upsampling_math.h"

#include <string.h>

extern const struct mxc__op_def mxc__op_Deconvolution;

struct up_param {
    int scale;
    int num_filter;
    int sample_type;
    int multi_input_mode;
    int num_args;
    int workspace;
};

enum { UP_NEAREST, UP_BILINEAR };
enum { UP_CONCAT, UP_SUM };
static const char *const up_types[] = {"nearest", "bilinear", NULL};
static const char *const up_modes[] = {"concat", "sum", NULL};

#define UP struct up_param
static const struct mxc__param up_params[] = {
    MXC__P_INT(UP, scale, NULL, 1, 2147483647, "output size over the first input's size"),
    MXC__P_INT(UP, num_filter, "0", 0, 2147483647, "bilinear only: data's channels"),
    MXC__P_ENUM(UP, sample_type, NULL, up_types, "nearest, or bilinear (with a weight input)"),
    MXC__P_ENUM(UP, multi_input_mode, "concat", up_modes,
                "several inputs: concat their channels or sum them"),
    MXC__P_INT(UP, num_args, NULL, 1, MXC__MAX_OP_ARGS, "number of inputs"),
    MXC__P_INT(UP, workspace, "512", 0, 2147483647, "accepted for compatibility (MB)"),
};
#undef UP

static const char *const arg_names[] = {"arg0",  "arg1",  "arg2",  "arg3", "arg4",  "arg5",
                                        "arg6",  "arg7",  "arg8",  "arg9", "arg10", "arg11",
                                        "arg12", "arg13", "arg14", "arg15"};

static const char *const bilinear_inputs[] = {"data", "weight"};

static int up_inputs(const void *params, const char **names, int max) {
    const struct up_param *p = params;
    if (p->sample_type == UP_BILINEAR) {
        for (int i = 0; i < 2 && i < max; i++)
            names[i] = bilinear_inputs[i];
        return 2;
    }
    for (int i = 0; i < p->num_args && i < max; i++)
        names[i] = arg_names[i];
    return p->num_args;
}

static const char *const up_outputs[] = {"output", NULL};

/* The Deconvolution that bilinear UpSampling is (MXNet's GetDeconvolutionParam). */
static struct conv_param bilinear_deconv(const struct up_param *p) {
    struct conv_param d;
    memset(&d, 0, sizeof d);
    const int64_t s = p->scale, k = 2 * s - s % 2, pad = s / 2; /* s / 2 = ceil((s - 1) / 2) */
    d.kernel = mxc_shape_make(2, (int64_t[]){k, k});
    d.stride = mxc_shape_make(2, (int64_t[]){s, s});
    d.pad = mxc_shape_make(2, (int64_t[]){pad, pad});
    d.num_filter = d.num_group = p->num_filter;
    d.workspace = p->workspace;
    d.no_bias = true;
    d.cudnn_tune = d.layout = -1;
    return d;
}

/* data (N, C, H, W) with C = num_filter, weight (C, 1, k, k) -> (N, C, H scale, W scale) */
static int bilinear_shape(const struct up_param *p, mxc_shape *in, mxc_shape *out) {
    const char *op = "UpSampling";
    char buf[128];
    int rc = MXC_OK;
    MXC_CHECK(p->num_filter >= 1, MXC_EINVAL,
              "%s: sample_type bilinear needs num_filter, data's channels", op);
    MXC_CHECK(in[0].ndim == 0 || (in[0].ndim == 4 && in[0].dims[1] == p->num_filter), MXC_EINVAL,
              "%s: bilinear data must be (N, num_filter = %d, H, W), got %s", op, p->num_filter,
              mxc__shape_str(&in[0], buf, sizeof buf));
    const struct conv_param d = bilinear_deconv(p);
    MXC_TRY(mxc__op_Deconvolution.infer_shape(&d, in, 2, out, 1, NULL, 0));
fail:
    return rc;
}

/* Output (N, C0 or sum of C, H0 * scale, W0 * scale) from known inputs; every input must
 * divide it evenly by one factor. */
static int up_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct up_param *p = params;
    const char *op = "UpSampling";
    char buf[128];
    int rc = MXC_OK;
    (void)num_out, (void)aux, (void)num_aux;
    if (p->sample_type == UP_BILINEAR)
        return bilinear_shape(p, in, out);
    for (int i = 0; i < num_in; i++)
        if (in[i].ndim == 0)
            return MXC_OK; /* nothing flows back to the inputs from the output */
    for (int i = 0; i < num_in; i++)
        MXC_CHECK(in[i].ndim == 4, MXC_EINVAL, "%s: input %d must be 4-D (N, C, H, W), got %s", op,
                  i, mxc__shape_str(&in[i], buf, sizeof buf));
    mxc_shape o = in[0];
    MXC_CHECK(mxc__mul_add(0, in[0].dims[2], p->scale, &o.dims[2]) &&
                  mxc__mul_add(0, in[0].dims[3], p->scale, &o.dims[3]),
              MXC_EINVAL, "%s: data %s times scale %d overflows", op,
              mxc__shape_str(&in[0], buf, sizeof buf), p->scale);
    for (int i = 1; i < num_in; i++) {
        const mxc_shape *s = &in[i];
        MXC_CHECK(s->dims[0] == o.dims[0], MXC_ESHAPE,
                  "%s: input %d has batch %lld, input 0 has %lld", op, i, (long long)s->dims[0],
                  (long long)o.dims[0]);
        const bool divides = s->dims[2] > 0 && s->dims[3] > 0 && o.dims[2] % s->dims[2] == 0 &&
                             o.dims[3] % s->dims[3] == 0 &&
                             o.dims[2] / s->dims[2] == o.dims[3] / s->dims[3];
        MXC_CHECK(divides, MXC_ESHAPE,
                  "%s: input %d %s does not scale evenly to the output's %lld x %lld", op, i,
                  mxc__shape_str(s, buf, sizeof buf), (long long)o.dims[2], (long long)o.dims[3]);
        if (p->multi_input_mode == UP_SUM)
            MXC_CHECK(s->dims[1] == o.dims[1], MXC_ESHAPE,
                      "%s: multi_input_mode sum needs equal channels: input %d has %lld, input "
                      "0 has %lld",
                      op, i, (long long)s->dims[1], (long long)o.dims[1]);
        else
            MXC_CHECK(mxc__mul_add(o.dims[1], s->dims[1], 1, &o.dims[1]), MXC_EINVAL,
                      "%s: the inputs' channels overflow", op);
    }
    MXC_CHECK(mxc_shape_size(&o) >= 0, MXC_EINVAL, "%s: the output %s has too many elements", op,
              mxc__shape_str(&o, buf, sizeof buf));
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

/* Input k's place in the output: `ins` are the inputs (forward) or their gradients
 * (backward), `o` the output (forward) or its gradient. */
static struct mxc__up_view up_view(const struct mxc__op_call *c, const struct mxc__tensor *ins,
                                   const mxc_shape *o, int k) {
    const struct up_param *p = c->params;
    const mxc_shape *s = &ins[k].shape;
    int64_t off = 0;
    for (int i = 0; i < k && p->multi_input_mode == UP_CONCAT; i++)
        off += ins[i].shape.dims[1];
    const int64_t scale = k ? o->dims[2] / s->dims[2] : p->scale; /* others divide: up_shape */
    return (struct mxc__up_view){s->dims[1], s->dims[2], s->dims[3], o->dims[1],
                                 o->dims[2], o->dims[3], off,        scale};
}

/* Runs Deconvolution's kernel `k` on the call, with bilinear UpSampling's deconvolution. */
static int bilinear_run(const struct mxc__op_call *c, mxc__op_kernel k) {
    const struct conv_param d = bilinear_deconv(c->params);
    struct mxc__op_call dc = *c;
    dc.params = &d;
    return k(&dc);
}

/* Each input writes its channels (concat), or the first writes and the others add (sum). */
static int up_forward(const struct mxc__op_call *c) {
    const struct up_param *p = c->params;
    if (p->sample_type == UP_BILINEAR)
        return bilinear_run(c, mxc__op_Deconvolution.forward_cpu);
    float *y = c->out_data[0].data;
    for (int k = 0; k < p->num_args && c->req[0] != MXC__REQ_NULL; k++) {
        const struct mxc__up_view v = up_view(c, c->in_data, &c->out_data[0].shape, k);
        const float *x = c->in_data[k].data;
        const bool add = c->req[0] == MXC__REQ_ADD || (p->multi_input_mode == UP_SUM && k > 0);
        const int64_t n = c->in_data[k].size * v.s * v.s;
        for (int64_t e = 0; e < n; e++) {
            int64_t oi, xi;
            mxc__up_at(e, &v, &oi, &xi);
            y[oi] = add ? y[oi] + x[xi] : x[xi];
        }
    }
    return MXC_OK;
}

static int up_backward(const struct mxc__op_call *c) {
    const struct up_param *p = c->params;
    if (p->sample_type == UP_BILINEAR)
        return bilinear_run(c, mxc__op_Deconvolution.backward_cpu);
    const float *dy = c->out_grad[0].data;
    for (int k = 0; k < p->num_args; k++) {
        if (c->req[k] == MXC__REQ_NULL)
            continue;
        const struct mxc__up_view v = up_view(c, c->in_grad, &c->out_grad[0].shape, k);
        float *dx = c->in_grad[k].data;
        for (int64_t e = 0; e < c->in_grad[k].size; e++) {
            const float g = mxc__up_grad(dy, e, &v);
            dx[e] = c->req[k] == MXC__REQ_ADD ? dx[e] + g : g;
        }
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* operator/upsampling_gpu.cu: one input's part, forward (adding or writing) and backward */
int mxc__up_forward_gpu(const float *x, float *y, int64_t n, const struct mxc__up_view *v, bool add,
                        void *stream);
int mxc__up_backward_gpu(const float *dy, float *dx, int64_t n, const struct mxc__up_view *v,
                         int req, void *stream);

static int up_forward_gpu(const struct mxc__op_call *c) {
    const struct up_param *p = c->params;
    if (p->sample_type == UP_BILINEAR)
        return bilinear_run(c, mxc__op_Deconvolution.forward_gpu);
    int rc = MXC_OK;
    for (int k = 0; k < p->num_args && c->req[0] != MXC__REQ_NULL && rc == MXC_OK; k++) {
        const struct mxc__up_view v = up_view(c, c->in_data, &c->out_data[0].shape, k);
        const bool add = c->req[0] == MXC__REQ_ADD || (p->multi_input_mode == UP_SUM && k > 0);
        rc = mxc__up_forward_gpu(c->in_data[k].data, c->out_data[0].data,
                                 c->in_data[k].size * v.s * v.s, &v, add, c->rctx->stream);
    }
    return rc;
}

static int up_backward_gpu(const struct mxc__op_call *c) {
    const struct up_param *p = c->params;
    if (p->sample_type == UP_BILINEAR)
        return bilinear_run(c, mxc__op_Deconvolution.backward_gpu);
    int rc = MXC_OK;
    for (int k = 0; k < p->num_args && rc == MXC_OK; k++) {
        if (c->req[k] == MXC__REQ_NULL)
            continue;
        const struct mxc__up_view v = up_view(c, c->in_grad, &c->out_grad[0].shape, k);
        rc = mxc__up_backward_gpu(c->out_grad[0].data, c->in_grad[k].data, c->in_grad[k].size, &v,
                                  c->req[k], c->rctx->stream);
    }
    return rc;
}
#endif

const struct mxc__op_def mxc__op_UpSampling = {
    .name = "UpSampling",
    .description = "nearest upsampling of inputs (concatenated or summed), or bilinear",
    .param_size = sizeof(struct up_param),
    .params = up_params,
    .num_params = (int)MXC_ARRAY_SIZE(up_params),
    .list_inputs = up_inputs,
    .outputs = up_outputs,
    .infer_shape = up_shape,
    /* bilinear: Deconvolution's needs (data and weight, temp space) */
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = up_forward,
    .backward_cpu = up_backward,
    .forward_gpu = MXC__GPU(up_forward_gpu),
    .backward_gpu = MXC__GPU(up_backward_gpu),
};
