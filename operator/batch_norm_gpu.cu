/*
 * operator/batch_norm_gpu.cu — BatchNorm on a GPU, one thread block per channel of data
 * seen as (outer, C, inner) (operator/channel_sum.cuh): the block sums its channel's
 * statistics in double, as the CPU kernels do (operator/batch_norm.c), then writes the
 * channel's outputs with the shared arithmetic of operator/batch_norm_math.h. Nothing
 * is shared in place, and every block touches only its own channel, so no temp space is
 * needed: the hidden outputs mean and var (inverse std) are stored by each block.
 */
#include "operator/channel_sum.cuh"
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/batch_norm_math.h"
}

/* Forward. x, y: (outer, C, inner); gamma, beta, moving stats, mean, invstd: (C). */
extern "C" int mxc__bn_forward_gpu(const struct mxc__op_call *c) {
    const struct bn_param *p = (const struct bn_param *)c->params;
    int64_t outer, ch, inner;
    bn_dims(p, &c->in_data[0].shape, &outer, &ch, &inner);
    const float *x = (const float *)c->in_data[0].data;
    const float *gamma = (const float *)c->in_data[1].data;
    const float *beta = (const float *)c->in_data[2].data;
    float *mmean = (float *)c->aux[0].data, *mvar = (float *)c->aux[1].data;
    float *y = (float *)c->out_data[0].data;
    const bool hidden = c->num_out > 2;
    float *mean_out = hidden ? (float *)c->out_data[1].data : NULL;
    float *invstd_out = hidden ? (float *)c->out_data[2].data : NULL;
    const int req = c->req[0], mreq = hidden ? c->req[1] : (int)MXC__REQ_NULL;
    const int vreq = hidden ? c->req[2] : (int)MXC__REQ_NULL;
    const bool train = bn_training(c), fix_gamma = p->fix_gamma;
    const double eps = p->eps;
    const float momentum = p->momentum;
    const int64_t m = outer * inner;
    return mxc__per_channel(ch, c->rctx->stream, "BatchNorm", [=] __device__(int64_t k) {
        double mu, var;
        if (train) {
            double s = 0;
            for (int64_t j = threadIdx.x; j < m; j += blockDim.x)
                s += x[mxc__channel_at(j, ch, inner, k)];
            s = mxc__block_sum(s);
            mu = m ? s / (double)m : 0.0;
            double ss = 0;
            for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
                const double d = (double)x[mxc__channel_at(j, ch, inner, k)] - mu;
                ss += d * d;
            }
            ss = mxc__block_sum(ss);
            var = m ? ss / (double)m : 0.0;
            if (threadIdx.x == 0) { /* only this thread reads or writes them */
                mmean[k] = mxc__bn_moving(mmean[k], (float)mu, momentum);
                mvar[k] = mxc__bn_moving(mvar[k], (float)var, momentum);
            }
        } else {
            mu = mmean[k];
            var = mvar[k];
        }
        const float meanf = (float)mu, invstd = mxc__bn_invstd(var, eps);
        if (threadIdx.x == 0) {
            mxc__put(mreq, mean_out, k, meanf);
            mxc__put(vreq, invstd_out, k, invstd);
        }
        if (req == MXC__REQ_NULL)
            return;
        const float scale = (fix_gamma ? 1.0f : gamma[k]) * invstd;
        const float shift = mxc__bn_shift(beta[k], meanf, scale);
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            const int64_t e = mxc__channel_at(j, ch, inner, k);
            mxc__put(req, y, e, x[e] * scale + shift);
        }
    });
}

/* Backward, with m = outer * inner elements per channel (see bn_backward):
 * d_gamma = sum(dy (x - mean)) * invstd (0 with fix_gamma), d_beta = sum(dy), and dx by
 * mxc__bn_dx with the batch's statistics in training, as constants otherwise. */
extern "C" int mxc__bn_backward_gpu(const struct mxc__op_call *c) {
    const struct bn_param *p = (const struct bn_param *)c->params;
    int64_t outer, ch, inner;
    bn_dims(p, &c->in_data[0].shape, &outer, &ch, &inner);
    const float *x = (const float *)c->in_data[0].data;
    const float *gamma = (const float *)c->in_data[1].data;
    const float *mean = (const float *)c->out_data[1].data;
    const float *invstd = (const float *)c->out_data[2].data;
    const float *dy = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data, *dgamma = (float *)c->in_grad[1].data;
    float *dbeta = (float *)c->in_grad[2].data;
    const int req = c->req[0], greq = c->req[1], breq = c->req[2];
    const bool train = bn_training(c), fix_gamma = p->fix_gamma;
    const int64_t m = outer * inner;
    return mxc__per_channel(ch, c->rctx->stream, "BatchNorm backward", [=] __device__(int64_t k) {
        const float mu = mean[k], is = invstd[k];
        double sg = 0, dot = 0;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            const int64_t e = mxc__channel_at(j, ch, inner, k);
            sg += dy[e];
            dot += (double)dy[e] * ((double)x[e] - mu);
        }
        sg = mxc__block_sum(sg);
        dot = mxc__block_sum(dot);
        if (threadIdx.x == 0) {
            mxc__put(greq, dgamma, k, fix_gamma ? 0.0f : (float)dot * is);
            mxc__put(breq, dbeta, k, (float)sg);
        }
        if (req == MXC__REQ_NULL)
            return;
        const float iw = is * (fix_gamma ? 1.0f : gamma[k]);
        const float gmean = train && m ? (float)(sg / (double)m) : 0.0f;
        const float kk = train && m ? (float)(dot / (double)m) * is * is : 0.0f;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            const int64_t e = mxc__channel_at(j, ch, inner, k);
            mxc__put(req, dx, e, mxc__bn_dx(dy[e], x[e], mu, gmean, kk, iw));
        }
    });
}

/* ---- What the cuDNN path needs besides cuDNN (operator/batch_norm.c) ------------------ */

extern "C" int mxc__bn_dnn_stats_gpu(const struct mxc__op_call *c, const float *save_mean,
                                     const float *save_invstd, const float *uvar, int64_t m) {
    const struct bn_param *p = (const struct bn_param *)c->params;
    const int64_t ch = c->aux[0].size;
    float *mmean = (float *)c->aux[0].data, *mvar = (float *)c->aux[1].data;
    const bool hidden = c->num_out > 2, train = bn_training(c);
    float *mean_out = hidden ? (float *)c->out_data[1].data : NULL;
    float *invstd_out = hidden ? (float *)c->out_data[2].data : NULL;
    const int mreq = hidden ? c->req[1] : (int)MXC__REQ_NULL;
    const int vreq = hidden ? c->req[2] : (int)MXC__REQ_NULL;
    const double eps = p->eps, unbias = m > 0 ? (double)(m - 1) / (double)m : 0.0;
    const float momentum = p->momentum;
    return mxc__launch(ch, c->rctx->stream, "BatchNorm statistics", [=] __device__(int64_t k) {
        float mean, invstd;
        if (train) {
            mean = save_mean[k];
            invstd = save_invstd[k];
            mmean[k] = mxc__bn_moving(mmean[k], mean, momentum);
            mvar[k] = mxc__bn_moving(mvar[k], (float)((double)uvar[k] * unbias), momentum);
        } else {
            mean = mmean[k];
            invstd = mxc__bn_invstd(mvar[k], eps);
        }
        mxc__put(mreq, mean_out, k, mean);
        mxc__put(vreq, invstd_out, k, invstd);
    });
}

extern "C" int mxc__bn_dnn_param_grad_gpu(const struct mxc__op_call *c, const float *dscale,
                                          const float *dbias) {
    const bool fix_gamma = ((const struct bn_param *)c->params)->fix_gamma;
    float *dgamma = (float *)c->in_grad[1].data, *dbeta = (float *)c->in_grad[2].data;
    const int greq = c->req[1], breq = c->req[2];
    return mxc__launch(c->in_data[1].size, c->rctx->stream, "BatchNorm parameter gradients",
                       [=] __device__(int64_t k) {
                           mxc__put(greq, dgamma, k, fix_gamma ? 0.0f : dscale[k]);
                           mxc__put(breq, dbeta, k, dbias[k]);
                       });
}

extern "C" int mxc__bn_ones_gpu(float *o, int64_t n, void *stream) {
    return mxc__launch(n, stream, "BatchNorm ones", [=] __device__(int64_t i) { o[i] = 1.0f; });
}
