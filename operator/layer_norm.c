/*
 * operator/layer_norm.c — LayerNorm, InstanceNorm and GroupNorm as MXNet 1.9.1 computes
 * them (and L2Normalization, at the end, which walks the same rows): each row of data
 * (which elements: operator/norm_math.h) is normalised with its own mean and biased
 * variance, then scaled and shifted per channel:
 *   out = (x - mean) / std * gamma + beta,   std = sqrt(var + eps)
 * The hidden outputs mean and std (one per row) are what the backward reads; LayerNorm
 * and GroupNorm show them with output_mean_var. The backward follows MXNet: the head
 * gradients of mean and std are ignored. CPU kernels here, GPU kernels in
 * operator/layer_norm_gpu.cu, the arithmetic shared through operator/norm_math.h.
 */
#include "operator/gpu.h"
#include "operator/norm_math.h"
#include "operator/op.h"

#include <math.h>

/* The three operators' parameters in one struct, so one set of kernels reads them. */
struct norm_param {
    int axis;       /* LayerNorm */
    int num_groups; /* GroupNorm */
    float eps;
    bool output_mean_var; /* LayerNorm, GroupNorm */
};

enum { NORM_LAYER, NORM_INSTANCE, NORM_GROUP };

#define NP struct norm_param
static const struct mxc__param layer_norm_params[] = {
    MXC__P_INT(NP, axis, "-1", -32, 31, "the axis to normalise over (negative: from the end)"),
    MXC__P_FLOAT(NP, eps, "1e-05", 1, 0, "added to the variance before the square root"),
    MXC__P_BOOL(NP, output_mean_var, "False", "also output the mean and std of each row"),
};
static const struct mxc__param instance_norm_params[] = {
    MXC__P_FLOAT(NP, eps, "0.001", 1, 0, "added to the variance before the square root"),
};
static const struct mxc__param group_norm_params[] = {
    MXC__P_INT(NP, num_groups, "1", 1, 2147483647, "groups the channels are split into"),
    MXC__P_FLOAT(NP, eps, "1e-05", 1, 0, "added to the variance before the square root"),
    MXC__P_BOOL(NP, output_mean_var, "False", "also output the mean and std of each group"),
};
#undef NP

static const char *const norm_inputs[] = {"data", "gamma", "beta", NULL};
static const char *const norm_outputs[] = {"output", "mean", "std", NULL};

static int shown_outputs(const void *params) {
    return ((const struct norm_param *)params)->output_mean_var ? 3 : 1;
}

static const char *const kind_names[] = {"LayerNorm", "InstanceNorm", "GroupNorm"};

/* LayerNorm's axis in an ndim-D data, or -1 when out of range. */
static int layer_axis(const struct norm_param *p, int ndim) {
    int a = p->axis < 0 ? p->axis + ndim : p->axis;
    return a >= 0 && a < ndim ? a : -1;
}

/* data's row view for operator `kind`; data's shape has passed the kind's checks. */
static struct mxc__norm_rows norm_rows(int kind, const struct norm_param *p, const mxc_shape *s) {
    struct mxc__norm_rows d = {0};
    int64_t outer, ch, inner;
    if (kind == NORM_LAYER) {
        mxc__axis_split(s, layer_axis(p, s->ndim), &outer, &ch, &inner);
        d = (struct mxc__norm_rows){outer * inner, ch, inner, 1, 1, ch};
    } else {
        mxc__axis_split(s, 1, &outer, &ch, &inner);
        int64_t g = kind == NORM_GROUP ? p->num_groups : ch;
        int64_t m = ch / (g ? g : 1) * inner;
        d = (struct mxc__norm_rows){outer * g, m, 1, g, kind == NORM_GROUP ? m : inner, g};
    }
    return d;
}

/* data -> output like data; gamma, beta (channels); mean, std: one per row, shaped as
 * MXNet shapes them (LayerNorm: data with the axis 1; GroupNorm (N, G); InstanceNorm
 * (N, C)). Data's checks are MXNet's: an axis in range, ndim >= 3 for GroupNorm with C a
 * multiple of num_groups. */
static int norm_shape(int kind, const struct norm_param *p, mxc_shape *in, mxc_shape *out,
                      int num_out) {
    const char *op = kind_names[kind];
    char buf[128];
    int rc = MXC_OK;
    MXC_TRY(mxc__shape_assign(&in[0], &out[0], op, "data"));
    if (in[0].ndim > 0) {
        const mxc_shape *s = &in[0];
        mxc_shape c = {0}, stat = *s;
        if (kind == NORM_LAYER) {
            int a = layer_axis(p, s->ndim);
            MXC_CHECK(a >= 0, MXC_EINVAL, "%s: axis %d is out of range for data of shape %s", op,
                      p->axis, mxc__shape_str(s, buf, sizeof buf));
            c = mxc_shape_make(1, &s->dims[a]);
            stat.dims[a] = 1;
        } else {
            MXC_CHECK(s->ndim >= (kind == NORM_GROUP ? 3 : 2), MXC_EINVAL,
                      "%s: data must have at least %d dimensions (N, C, ...), got %s", op,
                      kind == NORM_GROUP ? 3 : 2, mxc__shape_str(s, buf, sizeof buf));
            int64_t g = kind == NORM_GROUP ? p->num_groups : s->dims[1];
            MXC_CHECK(kind != NORM_GROUP || s->dims[1] % g == 0, MXC_EINVAL,
                      "%s: the %lld channels of data %s are not a multiple of num_groups %d", op,
                      (long long)s->dims[1], mxc__shape_str(s, buf, sizeof buf), p->num_groups);
            c = mxc_shape_make(1, &g);
            stat = mxc_shape_make(2, (int64_t[]){s->dims[0], g});
        }
        MXC_TRY(mxc__shape_assign(&in[1], &c, op, "gamma"));
        MXC_TRY(mxc__shape_assign(&in[2], &c, op, "beta"));
        for (int k = 1; k < num_out; k++)
            MXC_TRY(mxc__shape_assign(&out[k], &stat, op, norm_outputs[k]));
    }
    MXC_TRY(mxc__shape_assign(&out[0], &in[0], op, "output"));
fail:
    return rc;
}

#define NORM_SHAPE_FN(fn, kind)                                                               \
    static int fn(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out, \
                  mxc_shape *aux, int num_aux) {                                              \
        (void)num_in, (void)aux, (void)num_aux;                                               \
        return norm_shape(kind, params, in, out, num_out);                                    \
    }

static inline void put(int req, float *o, int64_t i, float v) {
    if (req == MXC__REQ_ADD)
        o[i] += v;
    else if (req != MXC__REQ_NULL)
        o[i] = v;
}

/* Forward of any of the three: per row, the mean and std (double sums), then the row. */
static int norm_forward(const struct mxc__op_call *c, int kind) {
    const struct norm_param *p = c->params;
    const struct mxc__norm_rows d = norm_rows(kind, p, &c->in_data[0].shape);
    const float *x = c->in_data[0].data, *gamma = c->in_data[1].data;
    const float *beta = c->in_data[2].data;
    float *y = c->out_data[0].data, *mean_out = c->out_data[1].data;
    float *std_out = c->out_data[2].data;
    for (int64_t r = 0; r < d.rows; r++) {
        double s = 0, ss = 0;
        for (int64_t j = 0; j < d.m; j++)
            s += x[mxc__norm_at(&d, r, j)];
        const double mu = d.m ? s / (double)d.m : 0.0;
        for (int64_t j = 0; j < d.m; j++) {
            const double e = (double)x[mxc__norm_at(&d, r, j)] - mu;
            ss += e * e;
        }
        const float meanf = (float)mu, sd = mxc__norm_std(ss, d.m, p->eps), rstd = 1.0f / sd;
        put(c->req[1], mean_out, r, meanf);
        put(c->req[2], std_out, r, sd);
        for (int64_t j = 0; j < d.m && c->req[0] != MXC__REQ_NULL; j++) {
            const int64_t e = mxc__norm_at(&d, r, j), g = mxc__norm_gamma_at(&d, r, j);
            put(c->req[0], y, e, mxc__norm_out(x[e], meanf, rstd, gamma[g], beta[g]));
        }
    }
    return MXC_OK;
}

/* Backward: first each channel's d_gamma = sum(dy * xhat) and d_beta = sum(dy), then
 * each row's dx (mxc__norm_dx), so that dx may be written over dy (in place). */
static int norm_backward(const struct mxc__op_call *c, int kind) {
    const struct norm_param *p = c->params;
    const struct mxc__norm_rows d = norm_rows(kind, p, &c->in_data[0].shape);
    const float *x = c->in_data[0].data, *gamma = c->in_data[1].data;
    const float *mean = c->out_data[1].data, *sd = c->out_data[2].data;
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data, *dgamma = c->in_grad[1].data, *dbeta = c->in_grad[2].data;
    const int64_t count = mxc__norm_channel_count(&d);
    for (int64_t k = 0; k < d.channels; k++) {
        double sg = 0, sgx = 0;
        for (int64_t t = 0; t < count; t++) {
            int64_t r, j;
            mxc__norm_channel_elem(&d, k, t, &r, &j);
            const int64_t e = mxc__norm_at(&d, r, j);
            sg += dy[e];
            sgx += (double)dy[e] * ((x[e] - mean[r]) / sd[r]);
        }
        put(c->req[1], dgamma, k, (float)sgx);
        put(c->req[2], dbeta, k, (float)sg);
    }
    for (int64_t r = 0; r < d.rows && c->req[0] != MXC__REQ_NULL; r++) {
        const float mu = mean[r], rstd = 1.0f / sd[r];
        double sg = 0, sgx = 0;
        for (int64_t j = 0; j < d.m; j++) {
            const int64_t e = mxc__norm_at(&d, r, j);
            const double g = (double)dy[e] * gamma[mxc__norm_gamma_at(&d, r, j)];
            sg += g;
            sgx += g * ((x[e] - mu) * rstd);
        }
        const float gmean = (float)(sg / (double)d.m), gxmean = (float)(sgx / (double)d.m);

        for (int64_t j = 0; j < d.m; j++) {
            const int64_t e = mxc__norm_at(&d, r, j);
            const float g = dy[e] * gamma[mxc__norm_gamma_at(&d, r, j)];
            put(c->req[0], dx, e, mxc__norm_dx(g, (x[e] - mu) * rstd, gmean, gxmean, rstd));
        }
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* operator/layer_norm_gpu.cu */
int mxc__norm_forward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *d, double eps);
int mxc__norm_backward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *d);
#define NORM_GPU_FNS(kind, fwd, bwd)                                                      \
    static int fwd(const struct mxc__op_call *c) {                                        \
        struct mxc__norm_rows d = norm_rows(kind, c->params, &c->in_data[0].shape);       \
        return mxc__norm_forward_gpu(c, &d, ((const struct norm_param *)c->params)->eps); \
    }                                                                                     \
    static int bwd(const struct mxc__op_call *c) {                                        \
        struct mxc__norm_rows d = norm_rows(kind, c->params, &c->in_data[0].shape);       \
        return mxc__norm_backward_gpu(c, &d);                                             \
    }
#else
#define NORM_GPU_FNS(kind, fwd, bwd)
#endif

/* One definition per operator; they differ in name, parameters and data's row view. */
#define NORM_OP(ident, kind, desc, table, visible)                                               \
    NORM_SHAPE_FN(ident##_shape_fn, kind)                                                        \
    static int ident##_forward(const struct mxc__op_call *c) { return norm_forward(c, kind); }   \
    static int ident##_backward(const struct mxc__op_call *c) { return norm_backward(c, kind); } \
    NORM_GPU_FNS(kind, ident##_forward_gpu, ident##_backward_gpu)                                \
    const struct mxc__op_def mxc__op_##ident = {                                                 \
        .name = #ident,                                                                          \
        .description = desc,                                                                     \
        .param_size = sizeof(struct norm_param),                                                 \
        .params = table,                                                                         \
        .num_params = (int)MXC_ARRAY_SIZE(table),                                                \
        .inputs = norm_inputs,                                                                   \
        .outputs = norm_outputs,                                                                 \
        .num_visible_outputs = 1,                                                                \
        .visible_outputs = visible,                                                              \
        .infer_shape = ident##_shape_fn,                                                         \
        .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA,               \
        .inplace = MXC__INPLACE(0, 0),                                                           \
        .backward_inplace = MXC__INPLACE(0, 0),                                                  \
        .forward_cpu = ident##_forward,                                                          \
        .backward_cpu = ident##_backward,                                                        \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),                                            \
        .backward_gpu = MXC__GPU(ident##_backward_gpu),                                          \
    };

NORM_OP(LayerNorm, NORM_LAYER, "normalises each position over one axis (Transformers)",
        layer_norm_params, shown_outputs)
NORM_OP(InstanceNorm, NORM_INSTANCE, "normalises each channel of each instance",
        instance_norm_params, NULL)
NORM_OP(GroupNorm, NORM_GROUP, "normalises each group of channels of each instance",
        group_norm_params, shown_outputs)

/* ---- L2Normalization ------------------------------------------------------------------ */

/* y = x / sqrt(sum x² + eps) over each instance (all but axis 0), each position's channels
 * (axis 1), or each channel's positions (the axes after 1); the hidden output norm holds
 * the divisors, shaped as MXNet shapes it: (N), (N, spatial...), (N, C). */
struct l2_param {
    float eps;
    int mode;
};

enum { L2_CHANNEL, L2_INSTANCE, L2_SPATIAL };
static const char *const l2_modes[] = {"channel", "instance", "spatial", NULL};
static const struct mxc__param l2_params[] = {
    MXC__P_FLOAT(struct l2_param, eps, "1e-10", 1, 0, "added to the sum of squares"),
    MXC__P_ENUM(struct l2_param, mode, "instance", l2_modes,
                "instance: all but axis 0; channel: axis 1; spatial: the axes after 1"),
};
static const char *const l2_inputs[] = {"data", NULL};
static const char *const l2_outputs[] = {"output", "norm", NULL};

static int l2_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct l2_param *p = params;
    const char *op = "L2Normalization";
    char buf[128];
    int rc = MXC_OK;
    (void)num_in, (void)aux, (void)num_aux;
    MXC_TRY(mxc__shape_assign(&in[0], &out[0], op, "data"));
    MXC_TRY(mxc__shape_assign(&out[0], &in[0], op, "output"));
    if (in[0].ndim == 0)
        return MXC_OK;
    const mxc_shape *s = &in[0];
    MXC_CHECK(p->mode == L2_INSTANCE || s->ndim >= 3, MXC_EINVAL,
              "%s: mode %s needs data of at least 3 dimensions, got %s", op, l2_modes[p->mode],
              mxc__shape_str(s, buf, sizeof buf));
    mxc_shape norm = mxc_shape_make(1, s->dims);
    if (p->mode == L2_SPATIAL)
        norm = mxc_shape_make(2, s->dims);
    if (p->mode == L2_CHANNEL) {
        norm = *s;
        for (int d = 1; d + 1 < s->ndim; d++)
            norm.dims[d] = s->dims[d + 1];
        norm.ndim--;
    }
    if (num_out > 1)
        MXC_TRY(mxc__shape_assign(&out[1], &norm, op, "norm"));
fail:
    return rc;
}

/* The rows of data of shape s (data's, or the output's in the backward) */
static struct mxc__norm_rows l2_rows(const struct mxc__op_call *c, const mxc_shape *s) {
    const struct l2_param *p = c->params;
    int64_t outer, ch, inner;
    if (p->mode == L2_INSTANCE) {
        outer = s->dims[0];
        inner = mxc_shape_size(s) / (outer ? outer : 1);
        return (struct mxc__norm_rows){outer, inner, 1, 1, 1, 0};
    }
    mxc__axis_split(s, 1, &outer, &ch, &inner);
    if (p->mode == L2_CHANNEL)
        return (struct mxc__norm_rows){outer * inner, ch, inner, 1, 1, 0};
    return (struct mxc__norm_rows){outer * ch, inner, 1, 1, 1, 0};
}

static int l2_forward(const struct mxc__op_call *c) {
    const struct l2_param *p = c->params;
    const struct mxc__norm_rows d = l2_rows(c, &c->in_data[0].shape);
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data, *norm = c->out_data[1].data;
    for (int64_t r = 0; r < d.rows; r++) {
        double ss = 0;
        for (int64_t j = 0; j < d.m; j++) {
            const double e = x[mxc__norm_at(&d, r, j)];
            ss += e * e;
        }
        const float n = mxc__l2_norm(ss, p->eps);
        put(c->req[1], norm, r, n);
        for (int64_t j = 0; j < d.m && c->req[0] != MXC__REQ_NULL; j++) {
            const int64_t e = mxc__norm_at(&d, r, j);
            put(c->req[0], y, e, x[e] / n);
        }
    }
    return MXC_OK;
}

/* Reads the output and norm only, so both directions may run in place: a row's sum is
 * taken before any of its elements is written. */
static int l2_backward(const struct mxc__op_call *c) {
    const struct mxc__norm_rows d = l2_rows(c, &c->out_data[0].shape);
    const float *y = c->out_data[0].data, *norm = c->out_data[1].data;
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data;
    for (int64_t r = 0; r < d.rows && c->req[0] != MXC__REQ_NULL; r++) {
        double s = 0;
        for (int64_t j = 0; j < d.m; j++) {
            const int64_t e = mxc__norm_at(&d, r, j);
            s += (double)dy[e] * y[e];
        }
        for (int64_t j = 0; j < d.m; j++) {
            const int64_t e = mxc__norm_at(&d, r, j);
            put(c->req[0], dx, e, mxc__l2_dx(dy[e], y[e], (float)s, norm[r]));
        }
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* operator/layer_norm_gpu.cu */
int mxc__l2_forward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *d, double eps);
int mxc__l2_backward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *d);
static int l2_forward_gpu(const struct mxc__op_call *c) {
    struct mxc__norm_rows d = l2_rows(c, &c->in_data[0].shape);
    return mxc__l2_forward_gpu(c, &d, ((const struct l2_param *)c->params)->eps);
}
static int l2_backward_gpu(const struct mxc__op_call *c) {
    struct mxc__norm_rows d = l2_rows(c, &c->out_data[0].shape);
    return mxc__l2_backward_gpu(c, &d);
}
#endif

const struct mxc__op_def mxc__op_L2Normalization = {
    .name = "L2Normalization",
    .description = "divides by the L2 norm of each instance, position or channel",
    .param_size = sizeof(struct l2_param),
    .params = l2_params,
    .num_params = (int)MXC_ARRAY_SIZE(l2_params),
    .inputs = l2_inputs,
    .outputs = l2_outputs,
    .num_visible_outputs = 1,
    .infer_shape = l2_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_cpu = l2_forward,
    .backward_cpu = l2_backward,
    .forward_gpu = MXC__GPU(l2_forward_gpu),
    .backward_gpu = MXC__GPU(l2_backward_gpu),
};
