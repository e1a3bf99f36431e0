/*
 * operator/activation.c — element-wise activations: Activation (relu, sigmoid, tanh,
 * softrelu, softsign) and LeakyReLU (leaky, prelu, elu, selu, gelu; rrelu is not
 * supported). Activation's gradients are all written with the output y, so its backward
 * reads only out_grad and out_data and the forward may run in place. LeakyReLU's
 * gradients read the input x (and prelu's per-channel gamma, broadcast along axis 1).
 * float32, row-major. The per-element arithmetic is operator/activation_math.h, shared
 * with the GPU kernels (operator/activation_gpu.cu).
 */
#include "operator/op.h"

#include "common/parallel.h"
#include "operator/activation_math.h"
#include "operator/cudnn_desc.h"
#include "operator/gpu.h"

#include <math.h>
#include <string.h>

static const char *const act_inputs[] = {"data", NULL};
static const char *const act_outputs[] = {"output", NULL};

/* out (n) = expr of element i, written as req asks (ADD accumulates). */
#define STORE(req, o, n, expr)                \
    do {                                      \
        if ((req) == MXC__REQ_ADD) {          \
            for (int64_t i = 0; i < (n); i++) \
                (o)[i] += (expr);             \
        } else if ((req) != MXC__REQ_NULL) {  \
            for (int64_t i = 0; i < (n); i++) \
                (o)[i] = (expr);              \
        }                                     \
    } while (0)

/* data and output share one shape, deduced in either direction. */
static int same_shape(mxc_shape *data, mxc_shape *out, const char *op) {
    int rc = mxc__shape_assign(data, out, op, "data");
    if (rc != MXC_OK)
        return rc;
    return mxc__shape_assign(out, data, op, "output");
}

/* ---- Activation -------------------------------------------------------------------- */

static const char *const act_choices[] = {"relu", "sigmoid", "tanh", "softrelu", "softsign", NULL};

static const struct mxc__param act_params[] = {
    MXC__P_ENUM(struct act_param, act_type, NULL, act_choices, "the activation function"),
};

static int act_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    return same_shape(&in[0], &out[0], "Activation");
}

/* One call's arrays, split by act_forward_range / act_backward_range over threads. */
struct act_job {
    int type, req;
    const float *x, *g; /* forward: x; backward: y (in x) and dy (in g) */
    float *out;
};

/* y[i] = f(x[i]) for i in [b, e); y may be x (in place). */
MXC__SIMD_KERNEL static void act_forward_range(void *arg, int64_t b, int64_t e) {
    const struct act_job *j = arg;
    const float *x = j->x + b;
    float *y = j->out + b;
    int64_t n = e - b;
    int req = j->req;
    switch (j->type) {
    case ACT_RELU: STORE(req, y, n, mxc__relu(x[i])); break;
    case ACT_SIGMOID: STORE(req, y, n, mxc__sigmoidf(x[i])); break;
    case ACT_TANH: STORE(req, y, n, mxc__tanhf(x[i])); break;
    case ACT_SOFTRELU: STORE(req, y, n, mxc__softrelu(x[i])); break;
    default: STORE(req, y, n, mxc__softsign(x[i])); break;
    }
}

/* dx (n) = dy (n) * f'(x), with f' written through y = f(x) (activation_math.h). dx may
 * be dy (in place). */
MXC__SIMD_KERNEL static void act_backward_range(void *arg, int64_t b, int64_t e) {
    const struct act_job *j = arg;
    const float *y = j->x + b, *g = j->g + b;
    float *dx = j->out + b;
    int64_t n = e - b;
    int req = j->req;
    switch (j->type) {
    case ACT_RELU: STORE(req, dx, n, mxc__relu_grad(y[i], g[i])); break;
    case ACT_SIGMOID: STORE(req, dx, n, mxc__sigmoid_grad(y[i], g[i])); break;
    case ACT_TANH: STORE(req, dx, n, mxc__tanh_grad(y[i], g[i])); break;
    case ACT_SOFTRELU: STORE(req, dx, n, mxc__softrelu_grad(y[i], g[i])); break;
    default: STORE(req, dx, n, mxc__softsign_grad(y[i], g[i])); break;
    }
}

/* Elements per thread below which splitting costs more than it saves. */
#define ACT_GRAIN 32768

static int act_forward(const struct mxc__op_call *c) {
    const struct act_param *p = c->params;
    struct act_job j = {p->act_type, c->req[0], c->in_data[0].data, NULL, c->out_data[0].data};
    if (j.req != MXC__REQ_NULL)
        mxc__parallel_for(c->out_data[0].size, ACT_GRAIN, act_forward_range, &j);
    return MXC_OK;
}

static int act_backward(const struct mxc__op_call *c) {
    const struct act_param *p = c->params;
    struct act_job j = {p->act_type, c->req[0], c->out_data[0].data, c->out_grad[0].data,
                        c->in_grad[0].data};
    if (j.req != MXC__REQ_NULL)
        mxc__parallel_for(c->in_grad[0].size, ACT_GRAIN, act_backward_range, &j);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__act_forward_gpu(const struct mxc__op_call *c);   /* activation_gpu.cu */
int mxc__act_backward_gpu(const struct mxc__op_call *c);  /* activation_gpu.cu */
int mxc__leaky_forward_gpu(const struct mxc__op_call *c); /* activation_gpu.cu */
int mxc__leaky_backward_gpu(const struct mxc__op_call *c);

#ifdef MXC_USE_CUDNN
/* Activation through cuDNN: relu, sigmoid and tanh forward, relu backward; MXC__DNN_OWN
 * for the rest (softrelu and softsign: cuDNN has neither). cuDNN's gradient also reads x,
 * which this operator's backward does not keep (it reads y, so that the forward may run in
 * place); relu's y stands in for x, as y > 0 exactly where x > 0 (and an in-place relu
 * hands cuDNN y as x anyway: Caffe's cuDNN ReLU has always run so), while sigmoid's and
 * tanh's gradients are left to the own kernel rather than trusting cuDNN to read only y.
 * The elements are one (1, 1, 1, n) tensor. cuDNN allows x == y forward and dy == dx
 * backward (identical descriptors), as this operator's in-place options need. */
static int act_dnn(const struct mxc__op_call *c, bool backward) {
    const struct act_param *p = c->params;
    const int req = c->req[0];
    int mode = p->act_type == ACT_RELU      ? CUDNN_ACTIVATION_RELU
               : backward                   ? -1
               : p->act_type == ACT_SIGMOID ? CUDNN_ACTIVATION_SIGMOID
               : p->act_type == ACT_TANH    ? CUDNN_ACTIVATION_TANH
                                            : -1;
    if (mode < 0)
        return MXC__DNN_OWN;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_ACT;
    k.p[0] = mode;
    const int64_t dims[4] = {1, 1, 1, c->out_data[0].size};
    const struct mxc__dnn *d;
    void *h;
    int rc = mxc__dnn_dims(k.x, dims, 4) ? mxc__dnn_get(c->rctx, &k, &d, &h) : MXC__DNN_OWN;
    if (rc != MXC_OK)
        return rc;
    const float one = 1.0f, beta = mxc__dnn_beta(req);
    if (!backward)
        return mxc__dnn_status(cudnnActivationForward(h, d->act, &one, d->x, c->in_data[0].data,
                                                      &beta, d->x, c->out_data[0].data),
                               "Activation", "cudnnActivationForward");
    const void *y = c->out_data[0].data;
    return mxc__dnn_status(cudnnActivationBackward(h, d->act, &one, d->x, y, d->x,
                                                   c->out_grad[0].data, d->x, y, &beta, d->x,
                                                   c->in_grad[0].data),
                           "Activation", "cudnnActivationBackward");
}
#endif

/* cuDNN where it takes the problem (a build with USE_CUDNN), else the own kernel. */
MXC__DNN_KERNEL(act_forward_gpu, act_dnn(c, false), mxc__act_forward_gpu)
MXC__DNN_KERNEL(act_backward_gpu, act_dnn(c, true), mxc__act_backward_gpu)
#endif

const struct mxc__op_def mxc__op_Activation = {
    .name = "Activation",
    .description = "element-wise relu, sigmoid, tanh, softrelu (log(1 + e^x)) or softsign "
                   "(x / (1 + |x|))",
    .param_size = sizeof(struct act_param),
    .params = act_params,
    .num_params = (int)MXC_ARRAY_SIZE(act_params),
    .inputs = act_inputs,
    .outputs = act_outputs,
    .infer_shape = act_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_cpu = act_forward,
    .backward_cpu = act_backward,
    .forward_gpu = MXC__GPU(act_forward_gpu),
    .backward_gpu = MXC__GPU(act_backward_gpu),
};

/* ---- LeakyReLU --------------------------------------------------------------------- */

static const char *const leaky_choices[] = {"rrelu", "leaky", "prelu", "elu", "selu", "gelu", NULL};

#define LP struct leaky_param
static const struct mxc__param leaky_params[] = {
    MXC__P_ENUM(LP, act_type, "leaky", leaky_choices,
                "leaky, prelu (learned gamma per channel), elu, selu, gelu (rrelu: not "
                "supported)"),
    MXC__P_FLOAT(LP, slope, "0.25", 1, 0, "the negative slope (leaky) or alpha (elu)"),
    MXC__P_FLOAT(LP, lower_bound, "0.125", 1, 0, "rrelu: lower bound of the random slope"),
    MXC__P_FLOAT(LP, upper_bound, "0.334", 1, 0, "rrelu: upper bound of the random slope"),
};
#undef LP

static int leaky_list_inputs(const void *params, const char **names, int max) {
    const struct leaky_param *p = params;
    static const char *const all[] = {"data", "gamma"};
    int n = p->act_type == LR_PRELU ? 2 : 1;
    for (int i = 0; i < n && i < max; i++)
        names[i] = all[i];
    return n;
}

/* data (N, C, ...) -> output of the same shape; prelu's gamma (C,) (or (1,): one slope
 * for every channel). */
static int leaky_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                       mxc_shape *aux, int num_aux) {
    const struct leaky_param *p = params;
    const char *op = "LeakyReLU";
    char buf[128];
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    if (p->act_type == LR_RRELU)
        return mxc__error(MXC_ENOTSUP,
                          "%s: act_type rrelu is not supported (leaky, prelu, "
                          "elu, selu, gelu are)",
                          op);
    int rc = same_shape(&in[0], &out[0], op);
    if (rc != MXC_OK || p->act_type != LR_PRELU || in[0].ndim == 0)
        return rc;
    if (in[0].ndim < 2)
        return mxc__error(MXC_ESHAPE,
                          "%s: prelu needs data with a channel axis (N, C, ...), "
                          "got %s",
                          op, mxc__shape_str(&in[0], buf, sizeof buf));
    if (in[1].ndim == 1 && in[1].dims[0] == 1)
        return MXC_OK; /* one shared slope */
    int64_t c = in[0].dims[1];
    mxc_shape g = mxc_shape_make(1, &c);
    return mxc__shape_assign(&in[1], &g, op, "gamma");
}

/* y = f(x), element-wise over data (N, C, ...). */
static int leaky_forward(const struct mxc__op_call *c) {
    const struct leaky_param *p = c->params;
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    int64_t n = c->out_data[0].size;
    int req = c->req[0];
    const float a = p->slope;
    switch (p->act_type) {
    case LR_LEAKY: STORE(req, y, n, mxc__leaky(x[i], a)); break;
    case LR_ELU: STORE(req, y, n, mxc__elu(x[i], a)); break;
    case LR_SELU: STORE(req, y, n, mxc__selu(x[i])); break;
    case LR_GELU: STORE(req, y, n, mxc__gelu(x[i])); break;
    case LR_PRELU: {
        int64_t outer, ch, inner, gs;
        mxc__prelu_dims(c, &outer, &ch, &inner, &gs);
        const float *gamma = c->in_data[1].data;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < ch; k++) {
                const float *xr = x + (o * ch + k) * inner;
                float *yr = y + (o * ch + k) * inner;
                const float gk = gamma[k * gs];
                STORE(req, yr, inner, mxc__leaky(xr[i], gk));
            }
        break;
    }
    default: return mxc__error(MXC_ENOTSUP, "LeakyReLU: act_type rrelu is not supported");
    }
    return MXC_OK;
}

/* dx = dy * f'(x); prelu also d_gamma (C) = sum over (outer, inner) of dy * x where x <= 0
 * (summed over every element for a shared gamma (1)). */
static int leaky_backward(const struct mxc__op_call *c) {
    const struct leaky_param *p = c->params;
    const float *x = c->in_data[0].data, *g = c->out_grad[0].data;
    float *dx = c->in_grad[0].data;
    int64_t n = c->in_grad[0].size;
    int req = c->req[0];
    const float a = p->slope;
    switch (p->act_type) {
    case LR_LEAKY: STORE(req, dx, n, mxc__leaky_grad(x[i], g[i], a)); break;
    case LR_ELU: STORE(req, dx, n, mxc__elu_grad(x[i], g[i], a)); break;
    case LR_SELU: STORE(req, dx, n, mxc__selu_grad(x[i], g[i])); break;
    case LR_GELU: STORE(req, dx, n, mxc__gelu_grad(x[i], g[i])); break;
    case LR_PRELU: {
        int64_t outer, ch, inner, gs;
        mxc__prelu_dims(c, &outer, &ch, &inner, &gs);
        const float *gamma = c->in_data[1].data;
        float *dgamma = c->in_grad[1].data;
        int greq = c->req[1];
        if (greq == MXC__REQ_WRITE || greq == MXC__REQ_INPLACE)
            memset(dgamma, 0, (size_t)c->in_grad[1].size * sizeof(float));
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < ch; k++) {
                const float *xr = x + (o * ch + k) * inner, *gr = g + (o * ch + k) * inner;
                const float gk = gamma[k * gs];
                if (greq != MXC__REQ_NULL) {
                    float s = 0.0f;
                    for (int64_t i = 0; i < inner; i++)
                        s += mxc__prelu_gamma_grad(xr[i], gr[i]);
                    dgamma[k * gs] += s;
                }
                if (req == MXC__REQ_NULL)
                    continue; /* dx is not wanted: it has no memory */
                float *dr = dx + (o * ch + k) * inner;
                STORE(req, dr, inner, mxc__leaky_grad(xr[i], gr[i], gk));
            }
        break;
    }
    default: return mxc__error(MXC_ENOTSUP, "LeakyReLU: act_type rrelu is not supported");
    }
    return MXC_OK;
}

const struct mxc__op_def mxc__op_LeakyReLU = {
    .name = "LeakyReLU",
    .description = "leaky ReLU family: leaky (x or slope x), prelu (per-channel learned "
                   "slope gamma), elu, selu, gelu",
    .param_size = sizeof(struct leaky_param),
    .params = leaky_params,
    .num_params = (int)MXC_ARRAY_SIZE(leaky_params),
    .list_inputs = leaky_list_inputs,
    .outputs = act_outputs,
    .infer_shape = leaky_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = leaky_forward,
    .backward_cpu = leaky_backward,
    .forward_gpu = MXC__GPU(mxc__leaky_forward_gpu),
    .backward_gpu = MXC__GPU(mxc__leaky_backward_gpu),
};
