/*
 * operator/batch_norm.c — BatchNorm over the channel axis `axis` of data, seen as
 * (outer, C, inner), row-major float32:
 *   out = (x - mean_c) * invstd_c * gamma_c + beta_c,   invstd = 1 / sqrt(var + eps)
 * Training (is_train and not use_global_stats) uses the batch's mean and biased variance
 * and moves the auxiliary states in place: moving = moving * momentum + batch * (1 -
 * momentum), the biased batch variance included (as MXNet 1.9 does). Otherwise the moving
 * statistics are used. The hidden outputs mean and var hold, as in MXNet, the mean and the
 * inverse standard deviation actually used; backward reads them instead of recomputing.
 * fix_gamma reads gamma as 1 and gives it a zero gradient. The per-channel and
 * per-element arithmetic is operator/batch_norm_math.h, shared with the GPU kernels
 * (operator/batch_norm_gpu.cu).
 */
#include "operator/batch_norm_math.h"
#include "operator/cudnn_desc.h"
#include "operator/gpu.h"
#include "operator/op.h"
#include "operator/row_sums.h"
#include "common/parallel.h"

#include <math.h>
#include <string.h>

#define BP struct bn_param
static const struct mxc__param bn_params[] = {
    MXC__P(MXC__PARAM_DOUBLE, BP, eps, "0.001", 0, 1e300, NULL,
           "added to the variance before the square root"),
    MXC__P_FLOAT(BP, momentum, "0.9", 0, 1, "decay of the moving averages"),
    MXC__P_BOOL(BP, fix_gamma, "True", "read gamma as 1 (its gradient is 0)"),
    MXC__P_BOOL(BP, use_global_stats, "False", "use the moving statistics in training too"),
    MXC__P_BOOL(BP, output_mean_var, "False",
                "accepted; mean and inverse std are always the hidden outputs"),
    MXC__P_INT(BP, axis, "1", -32, 31, "the channel axis (negative: from the end)"),
    MXC__P_BOOL(BP, cudnn_off, "False", "do not use cuDNN (ignored on CPU)"),
};
#undef BP

static const char *const bn_inputs[] = {"data", "gamma", "beta", NULL};
static const char *const bn_outputs[] = {"output", "mean", "var", NULL};
static const char *const bn_aux[] = {"moving_mean", "moving_var", NULL};

/* data (.., C at axis, ..) -> output like data; gamma, beta, mean, var and the moving
 * statistics (C). C comes from data, else from any known per-channel shape. */
static int bn_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct bn_param *p = params;
    const char *op = "BatchNorm";
    int rc = MXC_OK;
    char buf[128];
    (void)num_in;
    MXC_TRY(mxc__shape_assign(&in[0], &out[0], op, "data"));
    mxc_shape c = {0};
    if (in[0].ndim > 0) {
        int a = bn_axis(p, in[0].ndim);
        MXC_CHECK(a >= 0, MXC_EINVAL, "%s: axis %d is out of range for data of shape %s", op,
                  p->axis, mxc__shape_str(&in[0], buf, sizeof buf));
        c = mxc_shape_make(1, &in[0].dims[a]);
    }
    /* every per-channel argument, in the order they are checked against C */
    mxc_shape *per[6] = {&in[1], &in[2], NULL, NULL, NULL, NULL};
    const char *names[6] = {"gamma", "beta", "mean", "var", "moving_mean", "moving_var"};
    for (int i = 1; i < 3 && i < num_out; i++)
        per[1 + i] = &out[i];
    for (int i = 0; i < 2 && i < num_aux && aux; i++)
        per[4 + i] = &aux[i];
    for (int pass = 0; pass < 2; pass++) /* gather C, then hand it to the unknown ones */
        for (int i = 0; i < 6; i++) {
            if (per[i] == NULL)
                continue;
            MXC_TRY(mxc__shape_assign(per[i], &c, op, names[i]));
            MXC_TRY(mxc__shape_assign(&c, per[i], op, names[i]));
        }
    MXC_TRY(mxc__shape_assign(&out[0], &in[0], op, "output"));
fail:
    return rc;
}

/* Writes n values to o[at...] as `req` says. An output nobody asked for (req null, e.g. a
 * gradient bound with MXC_GRAD_NULL) may have no memory: `o` is then NULL, and even o + at
 * would be undefined, so nothing is computed from it. */
static void store(int req, float *o, int64_t at, const float *v, int64_t n) {
    if (req == MXC__REQ_ADD)
        for (int64_t i = 0; i < n; i++)
            o[at + i] += v[i];
    else if (req != MXC__REQ_NULL && o + at != v)
        memcpy(o + at, v, (size_t)n * sizeof(float));
}

/* One forward call, split by channel. x, y: (outer, C, inner); gamma, beta, moving
 * stats, mean, invstd: (C). */
struct bn_forward_job {
    const struct bn_param *p;
    int64_t outer, ch, inner;
    bool train;
    int req;
    const float *x, *gamma, *beta;
    float *mmean, *mvar, *y, *mean, *invstd;
};

static void bn_forward_channels(void *arg, int64_t k0, int64_t k1) {
    const struct bn_forward_job *j = arg;
    const struct bn_param *p = j->p;
    const int64_t m = j->outer * j->inner, stride = j->ch * j->inner;
    for (int64_t k = k0; k < k1; k++) {
        const float *xk = j->x + k * j->inner;
        double mu, var;
        if (j->train) {
            double s = 0, ss = 0;
            for (int64_t o = 0; o < j->outer; o++)
                s += mxc__row_sum(xk + o * stride, j->inner);
            mu = m ? s / (double)m : 0.0;
            for (int64_t o = 0; o < j->outer; o++)
                ss += mxc__row_sum_sq_dev(xk + o * stride, j->inner, (float)mu);
            var = m ? ss / (double)m : 0.0;
            j->mmean[k] = mxc__bn_moving(j->mmean[k], (float)mu, p->momentum);
            j->mvar[k] = mxc__bn_moving(j->mvar[k], (float)var, p->momentum);
        } else {
            mu = j->mmean[k];
            var = j->mvar[k];
        }
        j->mean[k] = (float)mu;
        j->invstd[k] = mxc__bn_invstd(var, p->eps);
        if (j->req == MXC__REQ_NULL)
            continue;
        const float scale = (p->fix_gamma ? 1.0f : j->gamma[k]) * j->invstd[k];
        const float shift = mxc__bn_shift(j->beta[k], j->mean[k], scale);
        for (int64_t o = 0; o < j->outer; o++) {
            const float *xr = xk + o * stride;
            float *yr = j->y + k * j->inner + o * stride;
            if (j->req == MXC__REQ_ADD)
                for (int64_t i = 0; i < j->inner; i++)
                    yr[i] += xr[i] * scale + shift;
            else
                for (int64_t i = 0; i < j->inner; i++)
                    yr[i] = xr[i] * scale + shift;
        }
    }
}

static int bn_forward(const struct mxc__op_call *c) {
    const struct bn_param *p = c->params;
    struct bn_forward_job j = {.p = p,
                               .train = bn_training(c),
                               .req = c->req[0],
                               .x = c->in_data[0].data,
                               .gamma = c->in_data[1].data,
                               .beta = c->in_data[2].data,
                               .mmean = c->aux[0].data,
                               .mvar = c->aux[1].data,
                               .y = c->out_data[0].data};
    bn_dims(p, &c->in_data[0].shape, &j.outer, &j.ch, &j.inner);
    float *stats;
    int rc = mxc__resource_temp(c->resources[0], (size_t)(2 * j.ch + 1) * sizeof(float),
                                (void **)&stats);
    if (rc != MXC_OK)
        return rc;
    j.mean = stats;
    j.invstd = stats + j.ch;
    mxc__parallel_for(j.ch, mxc__channel_grain(j.outer * j.inner), bn_forward_channels, &j);
    if (c->num_out > 2) {
        store(c->req[1], c->out_data[1].data, 0, j.mean, j.ch);
        store(c->req[2], c->out_data[2].data, 0, j.invstd, j.ch);
    }
    return MXC_OK;
}

/* Backward, with m = outer * inner elements per channel, xh = x - mean:
 *   training:  dx = (dy - sum(dy) / m - xh * invstd² * sum(dy xh) / m) * invstd * gamma
 *   otherwise: dx = dy * invstd * gamma          (the statistics are constants)
 *   d_gamma = sum(dy xh) * invstd (0 with fix_gamma), d_beta = sum(dy).
 * Split by channel as the forward. */
struct bn_backward_job {
    const struct mxc__op_call *c;
    int64_t outer, ch, inner;
};

static void bn_backward_channels(void *arg, int64_t k0, int64_t k1) {
    const struct bn_backward_job *j = arg;
    const struct mxc__op_call *c = j->c;
    const struct bn_param *p = c->params;
    const float *x = c->in_data[0].data, *gamma = c->in_data[1].data;
    const float *mean = c->out_data[1].data, *invstd = c->out_data[2].data;
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data, *dgamma = c->in_grad[1].data, *dbeta = c->in_grad[2].data;
    const int64_t m = j->outer * j->inner, stride = j->ch * j->inner;
    const bool train = bn_training(c);
    const int req = c->req[0];
    for (int64_t k = k0; k < k1; k++) {
        const int64_t at = k * j->inner;
        const float is = invstd[k], mu = mean[k];
        double sg = 0, dot = 0;
        for (int64_t o = 0; o < j->outer; o++)
            dot += mxc__row_dot_dev(dy + at + o * stride, x + at + o * stride, j->inner, mu, &sg);
        const float iw = is * (p->fix_gamma ? 1.0f : gamma[k]);
        const float gmean = train && m ? (float)(sg / (double)m) : 0.0f;
        const float kk = train && m ? (float)(dot / (double)m) * is * is : 0.0f;
        for (int64_t o = 0; o < j->outer && req != MXC__REQ_NULL; o++) {
            const float *xr = x + at + o * stride, *gr = dy + at + o * stride;
            float *dr = dx + at + o * stride;
            if (req == MXC__REQ_ADD)
                for (int64_t i = 0; i < j->inner; i++)
                    dr[i] += mxc__bn_dx(gr[i], xr[i], mu, gmean, kk, iw);
            else
                for (int64_t i = 0; i < j->inner; i++)
                    dr[i] = mxc__bn_dx(gr[i], xr[i], mu, gmean, kk, iw);
        }
        const float dg = p->fix_gamma ? 0.0f : (float)dot * is, db = (float)sg;
        store(c->req[1], dgamma, k, &dg, 1);
        store(c->req[2], dbeta, k, &db, 1);
    }
}

static int bn_backward(const struct mxc__op_call *c) {
    struct bn_backward_job j = {.c = c};
    bn_dims(c->params, &c->in_data[0].shape, &j.outer, &j.ch, &j.inner);
    mxc__parallel_for(j.ch, mxc__channel_grain(j.outer * j.inner), bn_backward_channels, &j);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__bn_forward_gpu(const struct mxc__op_call *c);  /* batch_norm_gpu.cu */
int mxc__bn_backward_gpu(const struct mxc__op_call *c); /* batch_norm_gpu.cu */

#ifdef MXC_USE_CUDNN
/* BatchNorm through cuDNN: CUDNN_BATCHNORM_SPATIAL over data seen as (outer, C, inner, 1).
 * bn_dnn_begin gives the descriptors, the handle and `n` arrays of C floats of temp space
 * (*temp, each BN_DNN_STRIDE(C) floats apart, 256-byte aligned as cuDNN's arrays are
 * elsewhere), or MXC__DNN_OWN for what the own kernels keep: cudnn_off, a channel axis
 * other than 1, eps below CUDNN_BN_MIN_EPSILON, an empty tensor or one beyond int, and in
 * training channels of fewer than 2 elements (cuDNN's unbiased variance divides by m - 1). */
#define BN_DNN_STRIDE(ch) (((ch) + 63) / 64 * 64)

static int bn_dnn_begin(const struct mxc__op_call *c, int n, const struct mxc__dnn **d, void **h,
                        float **temp) {
    const struct bn_param *p = c->params;
    const mxc_shape *s = &c->in_data[0].shape;
    if (p->cudnn_off || bn_axis(p, s->ndim) != 1 || p->eps < CUDNN_BN_MIN_EPSILON)
        return MXC__DNN_OWN;
    int64_t outer, ch, inner;
    bn_dims(p, s, &outer, &ch, &inner);
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_BN;
    const int64_t dims[4] = {outer, ch, inner, 1};
    if ((bn_training(c) && outer * inner < 2) || !mxc__dnn_dims(k.x, dims, 4))
        return MXC__DNN_OWN;
    int rc = mxc__dnn_get(c->rctx, &k, d, h);
    if (rc == MXC_OK)
        rc = mxc__resource_temp(c->resources[0], (size_t)(n * BN_DNN_STRIDE(ch)) * sizeof(float),
                                (void **)temp);
    return rc;
}

/* gamma, or with fix_gamma C ones written at `ones`. */
static const float *bn_dnn_scale(const struct mxc__op_call *c, float *ones, int *rc) {
    if (!((const struct bn_param *)c->params)->fix_gamma)
        return c->in_data[1].data;
    *rc = mxc__bn_ones_gpu(ones, c->in_data[1].size, c->rctx->stream);
    return ones;
}

/* Forward: training through cudnnBatchNormalizationForwardTraining, which saves the batch
 * mean and inverse std (the hidden outputs); its running statistics go to zeroed temp
 * space with factor 1 (the batch's own, the variance unbiased) and mxc__bn_dnn_stats_gpu
 * moves the moving ones with the biased variance, as the CPU does. Otherwise
 * cudnnBatchNormalizationForwardInference with the moving statistics. A null request
 * for the output takes the own kernel (cuDNN always writes y). */
static int bn_dnn_forward(const struct mxc__op_call *c) {
    const struct bn_param *p = c->params;
    const int req = c->req[0];
    const int64_t ch = c->in_data[1].size, sc = BN_DNN_STRIDE(ch);
    const struct mxc__dnn *d;
    void *h;
    float *t; /* saved mean, saved inverse std, running mean, running variance, ones */
    int rc = req == MXC__REQ_NULL ? MXC__DNN_OWN : bn_dnn_begin(c, 5, &d, &h, &t);
    if (rc != MXC_OK)
        return rc;
    const float *scale = bn_dnn_scale(c, t + 4 * sc, &rc);
    const float one = 1.0f, beta = mxc__dnn_beta(req);
    const void *x = c->in_data[0].data, *bias = c->in_data[2].data;
    void *y = c->out_data[0].data;
    if (rc == MXC_OK && bn_training(c)) {
        rc = mxc__gpu_memset0(t + 2 * sc, (size_t)(2 * sc) * sizeof(float), c->rctx->stream);
        if (rc == MXC_OK)
            rc =
                mxc__dnn_status(cudnnBatchNormalizationForwardTraining(
                                    h, CUDNN_BATCHNORM_SPATIAL, &one, &beta, d->x, x, d->x, y, d->y,
                                    scale, bias, 1.0, t + 2 * sc, t + 3 * sc, p->eps, t, t + sc),
                                "BatchNorm", "cudnnBatchNormalizationForwardTraining");
    } else if (rc == MXC_OK) {
        rc = mxc__dnn_status(cudnnBatchNormalizationForwardInference(
                                 h, CUDNN_BATCHNORM_SPATIAL, &one, &beta, d->x, x, d->x, y, d->y,
                                 scale, bias, c->aux[0].data, c->aux[1].data, p->eps),
                             "BatchNorm", "cudnnBatchNormalizationForwardInference");
    }
    if (rc == MXC_OK)
        rc = mxc__bn_dnn_stats_gpu(c, t, t + sc, t + 3 * sc, c->in_data[0].size / ch);
    return rc;
}

/* Backward in training through cudnnBatchNormalizationBackward with the forward's saved
 * mean and inverse std (the hidden outputs, as the CPU reads them): dx with beta 0 or 1 as
 * its request says, the parameter gradients into temp space and from there stored as
 * their own requests say (mxc__bn_dnn_param_grad_gpu: cuDNN has one blend factor for
 * both, and fix_gamma's is 0). With the statistics constants (use_global_stats, or not
 * training) the gradient is not cuDNN's, and a null request for dx (cuDNN always writes
 * it) takes the own kernel too. */
static int bn_dnn_backward(const struct mxc__op_call *c) {
    const struct bn_param *p = c->params;
    const int64_t sc = BN_DNN_STRIDE(c->in_data[1].size);
    const struct mxc__dnn *d;
    void *h;
    float *t; /* d_scale, d_bias, ones */
    int rc = !bn_training(c) || c->req[0] == MXC__REQ_NULL ? MXC__DNN_OWN
                                                           : bn_dnn_begin(c, 3, &d, &h, &t);
    if (rc != MXC_OK)
        return rc;
    const float *scale = bn_dnn_scale(c, t + 2 * sc, &rc);
    const float one = 1.0f, zero = 0.0f, beta = mxc__dnn_beta(c->req[0]);
    if (rc == MXC_OK)
        rc = mxc__dnn_status(
            cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero,
                                            d->x, c->in_data[0].data, d->x, c->out_grad[0].data,
                                            d->x, c->in_grad[0].data, d->y, scale, t, t + sc,
                                            p->eps, c->out_data[1].data, c->out_data[2].data),
            "BatchNorm", "cudnnBatchNormalizationBackward");
    if (rc == MXC_OK)
        rc = mxc__bn_dnn_param_grad_gpu(c, t, t + sc);
    return rc;
}
#endif

/* cuDNN where it takes the problem (a build with USE_CUDNN), else the own kernels. */
MXC__DNN_KERNEL(bn_forward_gpu, bn_dnn_forward(c), mxc__bn_forward_gpu)
MXC__DNN_KERNEL(bn_backward_gpu, bn_dnn_backward(c), mxc__bn_backward_gpu)
#endif

const struct mxc__op_def mxc__op_BatchNorm = {
    .name = "BatchNorm",
    .description = "batch normalisation over the channel axis, with moving statistics",
    .param_size = sizeof(struct bn_param),
    .params = bn_params,
    .num_params = (int)MXC_ARRAY_SIZE(bn_params),
    .inputs = bn_inputs,
    .outputs = bn_outputs,
    .num_visible_outputs = 1,
    .aux = bn_aux,
    .infer_shape = bn_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA,
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1}, /* cuDNN's parameter gradients */
    .forward_cpu = bn_forward,
    .backward_cpu = bn_backward,
    .forward_gpu = MXC__GPU(bn_forward_gpu),
    .backward_gpu = MXC__GPU(bn_backward_gpu),
};
