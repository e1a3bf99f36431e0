/*
 * operator/lrn_gpu.cu — LRN on a GPU: one thread per element, each summing its channel
 * window with the functions of operator/lrn_math.h that the CPU kernels (operator/lrn.c)
 * call. tmp_norm is written by one launch before the output reads it.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/lrn_math.h"
}

static struct mxc__lrn_view lrn_view(const struct mxc__op_call *c) {
    const mxc_shape *s = &c->in_data[0].shape;
    const struct lrn_param *p = (const struct lrn_param *)c->params;
    return {s->dims[1], s->dims[2] * s->dims[3], p->nsize / 2};
}

/* tmp_norm, which the backward needs even when nobody wants the output */
extern "C" int mxc__lrn_norm_gpu(const struct mxc__op_call *c) {
    const struct lrn_param p = *(const struct lrn_param *)c->params;
    const struct mxc__lrn_view v = lrn_view(c);
    const float *x = (const float *)c->in_data[0].data;
    float *norm = (float *)c->out_data[1].data;
    return mxc__launch(c->in_data[0].size, c->rctx->stream, "LRN", [=] __device__(int64_t i) {
        norm[i] = mxc__lrn_norm(x, i, i / v.inner % v.channels, v, &p);
    });
}

extern "C" int mxc__lrn_forward_gpu(const struct mxc__op_call *c) {
    const struct lrn_param p = *(const struct lrn_param *)c->params;
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data, *norm = (float *)c->out_data[1].data;
    const int64_t n = c->in_data[0].size;
    const int req = c->req[0];
    int rc = mxc__lrn_norm_gpu(c);
    if (rc != MXC_OK || req == MXC__REQ_NULL)
        return rc;
    return mxc__launch(n, c->rctx->stream, "LRN", [=] __device__(int64_t i) {
        mxc__put(req, y, i, x[i] * powf(norm[i], -p.beta));
    });
}

extern "C" int mxc__lrn_backward_gpu(const struct mxc__op_call *c) {
    const struct lrn_param p = *(const struct lrn_param *)c->params;
    const struct mxc__lrn_view v = lrn_view(c);
    const float *x = (const float *)c->in_data[0].data;
    const float *norm = (const float *)c->out_data[1].data;
    const float *dy = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(
        c->in_data[0].size, c->rctx->stream, "LRN backward", [=] __device__(int64_t i) {
            mxc__put(req, dx, i, mxc__lrn_dx(x, dy, norm, i, i / v.inner % v.channels, v, &p));
        });
}
