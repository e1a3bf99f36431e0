/*
 * operator/optimizer_gpu.cu — sgd_update, sgd_mom_update and adam_update on a GPU:
 * grid-stride maps over (n) float32 elements calling the MXC__HD updates of
 * operator/optimizer.h, as the CPU kernels do. The parameters travel by value into the
 * kernel; the states (aux) are updated in place, even when the output's req is null; the
 * output may be the weight (each element is loaded before it is stored).
 */
#include "operator/op_gpu.cuh"

#include "operator/optimizer.h"

/* weight, grad, out: (n) */
extern "C" int mxc__sgd_update_gpu(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *w = (const float *)c->in_data[0].data, *g = (const float *)c->in_data[1].data;
    float *o = (float *)c->out_data[0].data;
    return mxc__launch(
        c->out_data[0].size, c->rctx->stream, "sgd_update",
        [=] __device__(int64_t i) { mxc__put(req, o, i, mxc__sgd_step(&p, w[i], g[i])); });
}

/* weight, grad, mom (state, updated), out: (n) */
extern "C" int mxc__sgd_mom_update_gpu(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    const float *w = (const float *)c->in_data[0].data, *g = (const float *)c->in_data[1].data;
    float *mom = (float *)c->aux[0].data, *o = (float *)c->out_data[0].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, "sgd_mom_update",
                       [=] __device__(int64_t i) {
                           float m = mom[i];
                           const float v = mxc__sgd_mom_step(&p, w[i], g[i], &m);
                           mom[i] = m;
                           mxc__put(req, o, i, v);
                       });
}

/* weight, grad, mean and var (states, updated), out: (n) */
extern "C" int mxc__adam_update_gpu(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    const float *w = (const float *)c->in_data[0].data, *g = (const float *)c->in_data[1].data;
    float *mean = (float *)c->aux[0].data, *var = (float *)c->aux[1].data;
    float *o = (float *)c->out_data[0].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, "adam_update",
                       [=] __device__(int64_t i) {
                           float m = mean[i], v = var[i];
                           const float y = mxc__adam_step(&p, w[i], g[i], &m, &v);
                           mean[i] = m;
                           var[i] = v;
                           mxc__put(req, o, i, y);
                       });
}
