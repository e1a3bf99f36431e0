/*
 * operator/pad_gpu.cu — Pad on a GPU: one thread per output element forward, one per input
 * element backward (a gather, no atomics), with operator/pad_math.h's indexing that the CPU
 * kernels (operator/pad.c) use.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/pad_math.h"
}

extern "C" int mxc__pad_forward_gpu(const struct mxc__op_call *c, const struct mxc__pad_view *vp) {
    const struct mxc__pad_view v = *vp;
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, "Pad", [=] __device__(int64_t e) {
        mxc__put(req, y, e, mxc__pad_value(x, e, &v));
    });
}

extern "C" int mxc__pad_backward_gpu(const struct mxc__op_call *c, const struct mxc__pad_view *vp) {
    const struct mxc__pad_view v = *vp;
    const float *dy = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(
        c->in_grad[0].size, c->rctx->stream, "Pad backward",
        [=] __device__(int64_t e) { mxc__put(req, dx, e, mxc__pad_grad(dy, e, &v)); });
}
