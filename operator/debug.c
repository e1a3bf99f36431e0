/*
 * operator/debug.c — operators for testing the scheduler rather than the numerics.
 * `_sleep` passes its input through after sleeping, forward and backward, so tests can
 * tell from wall time whether independent branches of a graph ran at the same time. On a
 * GPU the sleep is a kernel spinning on the device clock ahead of the copy on the same
 * stream, so the output is written only once the GPU has been busy that long (tests use it
 * to check that nothing reads the output before the engine says it is ready).
 */
#include "operator/copy_gpu.h"
#include "operator/gpu.h"
#include "operator/op.h"

#include <time.h>

struct sleep_param {
    float seconds;
};

static const struct mxc__param sleep_params[] = {
    MXC__P_FLOAT(struct sleep_param, seconds, "0.01", 0, 10, "seconds to sleep per call"),
};

static const char *const sleep_inputs[] = {"data", NULL};
static const char *const sleep_outputs[] = {"output", NULL};

static void nap(const void *params) {
    double s = ((const struct sleep_param *)params)->seconds;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int sleep_forward(const struct mxc__op_call *c) {
    nap(c->params);
    mxc__copy_req(c->out_data[0].data, c->in_data[0].data, c->in_data[0].size, c->req[0]);
    return MXC_OK;
}

static int sleep_backward(const struct mxc__op_call *c) {
    nap(c->params);
    mxc__copy_req(c->in_grad[0].data, c->out_grad[0].data, c->out_grad[0].size, c->req[0]);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__spin_gpu(double seconds, void *stream); /* debug_gpu.cu */

/* spin on the GPU for `seconds`, then dst (=, +=) src on the same stream */
static int sleep_gpu(const struct mxc__op_call *c, float *dst, const float *src, int64_t n) {
    int rc = mxc__spin_gpu(((const struct sleep_param *)c->params)->seconds, c->rctx->stream);
    return rc == MXC_OK ? mxc__copy_req_gpu(dst, src, n, c->req[0], c->rctx->stream) : rc;
}

static int sleep_forward_gpu(const struct mxc__op_call *c) {
    return sleep_gpu(c, c->out_data[0].data, c->in_data[0].data, c->in_data[0].size);
}

static int sleep_backward_gpu(const struct mxc__op_call *c) {
    return sleep_gpu(c, c->in_grad[0].data, c->out_grad[0].data, c->out_grad[0].size);
}
#endif

static int sleep_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                       mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    int rc = mxc__shape_assign(&out[0], &in[0], "_sleep", "output");
    return rc == MXC_OK ? mxc__shape_assign(&in[0], &out[0], "_sleep", "data") : rc;
}

const struct mxc__op_def mxc__op__sleep = {
    .name = "_sleep",
    .description = "y = x, after sleeping `seconds` (forward and backward); for tests",
    .param_size = sizeof(struct sleep_param),
    .params = sleep_params,
    .num_params = 1,
    .inputs = sleep_inputs,
    .outputs = sleep_outputs,
    .infer_shape = sleep_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_cpu = sleep_forward,
    .backward_cpu = sleep_backward,
    .forward_gpu = MXC__GPU(sleep_forward_gpu),
    .backward_gpu = MXC__GPU(sleep_backward_gpu),
};
