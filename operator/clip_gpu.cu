/*
 * operator/clip_gpu.cu — clip on a GPU: grid-stride maps over (n) float32 elements calling
 * the MXC__HD arithmetic of operator/clip.h, as the CPU kernels do. Both passes may run in
 * place (each element is loaded before it is stored).
 */
#include "operator/op_gpu.cuh"

#include "operator/clip.h"

/* out (n) = clip(data (n)) */
extern "C" int mxc__clip_forward_gpu(const struct mxc__op_call *c) {
    const struct mxc__clip_param *p = (const struct mxc__clip_param *)c->params;
    const float lo = p->a_min, hi = p->a_max;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data;
    return mxc__launch(
        c->out_data[0].size, c->rctx->stream, "clip forward",
        [=] __device__(int64_t i) { mxc__put(req, y, i, mxc__clip_fwd(x[i], lo, hi)); });
}

/* d_data (n) = dy where a_min <= x <= a_max, else 0 */
extern "C" int mxc__clip_backward_gpu(const struct mxc__op_call *c) {
    const struct mxc__clip_param *p = (const struct mxc__clip_param *)c->params;
    const float lo = p->a_min, hi = p->a_max;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *x = (const float *)c->in_data[0].data, *g = (const float *)c->out_grad[0].data;
    float *gi = (float *)c->in_grad[0].data;
    return mxc__launch(
        c->in_grad[0].size, c->rctx->stream, "clip backward",
        [=] __device__(int64_t i) { mxc__put(req, gi, i, mxc__clip_grad(g[i], x[i], lo, hi)); });
}
