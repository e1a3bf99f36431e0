/*
 * operator/clip.c — clip: y = a_max if x > a_max, else a_min if x < a_min, else x (MXNet
 * tests the upper bound first, which decides the result when a_min > a_max). The gradient
 * passes where a_min <= x <= a_max, bounds included, as in MXNet's clip_grad. Element-wise,
 * so both passes may run in place. float32, shapes (n). The arithmetic is in
 * operator/clip.h, shared with the CUDA kernels of operator/clip_gpu.cu.
 */
#include "operator/clip.h"
#include "operator/gpu.h"
#include "operator/reduce.h"

static const struct mxc__param clip_params[] = {
    MXC__P_FLOAT(struct mxc__clip_param, a_min, NULL, 1, 0, "lower bound"),
    MXC__P_FLOAT(struct mxc__clip_param, a_max, NULL, 1, 0, "upper bound"),
};

static const char *const clip_inputs[] = {"data", NULL};
static const char *const clip_outputs[] = {"output", NULL};

/* data and output share one shape, deduced either way */
static int clip_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    int rc = mxc__shape_assign(&out[0], &in[0], "clip", "output");
    if (rc == MXC_OK)
        rc = mxc__shape_assign(&in[0], &out[0], "clip", "data");
    return rc;
}

/* out (n) = clip(data (n)) */
static int clip_forward(const struct mxc__op_call *c) {
    const struct mxc__clip_param *p = c->params;
    const float lo = p->a_min, hi = p->a_max;
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    if (c->req[0] != MXC__REQ_NULL)
        MXC__ROW_STORE(c->req[0], y, c->out_data[0].size, mxc__clip_fwd(x[i], lo, hi));
    return MXC_OK;
}

/* d_data (n) = dy where a_min <= x <= a_max, else 0 */
static int clip_backward(const struct mxc__op_call *c) {
    const struct mxc__clip_param *p = c->params;
    const float lo = p->a_min, hi = p->a_max;
    const float *x = c->in_data[0].data, *g = c->out_grad[0].data;
    float *gi = c->in_grad[0].data;
    if (c->req[0] != MXC__REQ_NULL)
        MXC__ROW_STORE(c->req[0], gi, c->in_grad[0].size, mxc__clip_grad(g[i], x[i], lo, hi));
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__clip_forward_gpu(const struct mxc__op_call *c);  /* clip_gpu.cu */
int mxc__clip_backward_gpu(const struct mxc__op_call *c); /* clip_gpu.cu */
#endif

const struct mxc__op_def mxc__op_clip = {
    .name = "clip",
    .description = "clips data to [a_min, a_max]",
    .param_size = sizeof(struct mxc__clip_param),
    .params = clip_params,
    .num_params = (int)MXC_ARRAY_SIZE(clip_params),
    .inputs = clip_inputs,
    .outputs = clip_outputs,
    .infer_shape = clip_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_cpu = clip_forward,
    .backward_cpu = clip_backward,
    .forward_gpu = MXC__GPU(mxc__clip_forward_gpu),
    .backward_gpu = MXC__GPU(mxc__clip_backward_gpu),
};
