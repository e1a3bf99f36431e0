/*
 * operator/activation_gpu.cu — Activation and LeakyReLU on a GPU: the CPU kernels'
 * element-wise maps (operator/activation.c) with the same per-element arithmetic
 * (operator/activation_math.h), and prelu's gamma gradient as one block per channel.
 * Activation may run in place (y over x, dx over dy): each element is loaded before it
 * is stored, as on the CPU.
 */
#include "operator/channel_sum.cuh"
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/activation_math.h"
}

/* y (n) = f(x) */
extern "C" int mxc__act_forward_gpu(const struct mxc__op_call *c) {
    const int t = ((const struct act_param *)c->params)->act_type, req = c->req[0];
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, "Activation",
                       [=] __device__(int64_t i) { mxc__put(req, y, i, mxc__act(t, x[i])); });
}

/* dx (n) = dy * f'(x), through y = f(x) */
extern "C" int mxc__act_backward_gpu(const struct mxc__op_call *c) {
    const int t = ((const struct act_param *)c->params)->act_type, req = c->req[0];
    const float *y = (const float *)c->out_data[0].data, *g = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(
        c->in_grad[0].size, c->rctx->stream, "Activation backward",
        [=] __device__(int64_t i) { mxc__put(req, dx, i, mxc__act_grad(t, y[i], g[i])); });
}

/* y = f(x) over data (N, C, ...); prelu's slope is gamma[k] for channel k (gamma[0] when
 * gamma is (1)). */
extern "C" int mxc__leaky_forward_gpu(const struct mxc__op_call *c) {
    const struct leaky_param *p = (const struct leaky_param *)c->params;
    const int t = p->act_type, req = c->req[0];
    const float a = p->slope;
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data;
    const int64_t n = c->out_data[0].size;
    void *stream = c->rctx->stream;
    if (t == LR_RRELU)
        return mxc__error(MXC_ENOTSUP, "LeakyReLU: act_type rrelu is not supported");
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    if (t != LR_PRELU)
        return mxc__launch(n, stream, "LeakyReLU", [=] __device__(int64_t i) {
            mxc__put(req, y, i, mxc__leaky_act(t, x[i], a));
        });
    int64_t outer, ch, inner, gs;
    mxc__prelu_dims(c, &outer, &ch, &inner, &gs);
    const float *gamma = (const float *)c->in_data[1].data;
    return mxc__launch(n, stream, "LeakyReLU prelu", [=] __device__(int64_t i) {
        mxc__put(req, y, i, mxc__leaky(x[i], gamma[(i / inner) % ch * gs]));
    });
}

/* dx = dy * f'(x); prelu also d_gamma (C) = sum over (outer, inner) of dy * x where x <= 0
 * (over every element for a shared gamma (1)). */
extern "C" int mxc__leaky_backward_gpu(const struct mxc__op_call *c) {
    const struct leaky_param *p = (const struct leaky_param *)c->params;
    const int t = p->act_type, req = c->req[0];
    const float a = p->slope;
    const float *x = (const float *)c->in_data[0].data, *g = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data;
    const int64_t n = c->in_grad[0].size;
    void *stream = c->rctx->stream;
    if (t == LR_RRELU)
        return mxc__error(MXC_ENOTSUP, "LeakyReLU: act_type rrelu is not supported");
    if (t != LR_PRELU)
        return req == MXC__REQ_NULL
                   ? MXC_OK
                   : mxc__launch(n, stream, "LeakyReLU backward", [=] __device__(int64_t i) {
                         mxc__put(req, dx, i, mxc__leaky_act_grad(t, x[i], g[i], a));
                     });
    int64_t outer, ch, inner, gs;
    mxc__prelu_dims(c, &outer, &ch, &inner, &gs);
    const float *gamma = (const float *)c->in_data[1].data;
    float *dgamma = (float *)c->in_grad[1].data;
    const int greq = c->req[1];
    int rc = MXC_OK;
    if (greq != MXC__REQ_NULL) {
        /* a shared gamma sums every element: data seen as (outer, 1, C * inner) */
        const int64_t gch = gs ? ch : 1, ginner = gs ? inner : ch * inner;
        rc = mxc__per_channel(gch, stream, "LeakyReLU prelu gamma", [=] __device__(int64_t k) {
            double s = 0;
            for (int64_t j = threadIdx.x; j < outer * ginner; j += blockDim.x) {
                const int64_t e = mxc__channel_at(j, gch, ginner, k);
                s += mxc__prelu_gamma_grad(x[e], g[e]);
            }
            s = mxc__block_sum(s);
            if (threadIdx.x == 0)
                mxc__put(greq, dgamma, k, (float)s);
        });
    }
    if (rc != MXC_OK || req == MXC__REQ_NULL)
        return rc;
    return mxc__launch(n, stream, "LeakyReLU prelu backward", [=] __device__(int64_t i) {
        mxc__put(req, dx, i, mxc__leaky_grad(x[i], g[i], gamma[(i / inner) % ch * gs]));
    });
}
