/*
 * operator/optimizer.c — optimizer steps as operators (sgd_update, sgd_mom_update,
 * adam_update), so parameter updates run on the engine in place: the weight is input 0
 * and may be the output array too (req INPLACE), the optimizer states (momentum; Adam's
 * mean and var) are auxiliary states the kernel updates in place. The formulas are MXNet
 * 1.9.1's, rounding order included where it matters:
 *   g' = clip(rescale_grad * grad, clip_gradient) + wd * weight      (SGD, momentum SGD)
 *   g' = clip(rescale_grad * grad + wd * weight, clip_gradient)      (Adam: wd before clip)
 * where clip(x, c) = min(max(x, -c), c) and a negative clip_gradient means no clipping;
 *   sgd_update:     out = weight - lr * g'
 *   sgd_mom_update: mom = momentum * mom - lr * g';  out = weight + mom
 *   adam_update:    mean = beta1 * mean + (1 - beta1) * g'
 *                   var  = beta2 * var + (1 - beta2) * g'²
 *                   out  = weight - lr * mean / (sqrt(var) + epsilon)
 * (adam_update does no bias correction: callers fold it into lr, as MXNet's Adam does).
 * Every tensor has the weight's shape and is read as a flat (n) float32 array. The states
 * are updated even when the output's req is null. Not differentiable. The per-element
 * updates are in operator/optimizer.h, shared with the CUDA kernels of
 * operator/optimizer_gpu.cu.
 */
#include "operator/optimizer.h"
#include "operator/gpu.h"
#include "operator/op.h"

#define OP     struct mxc__opt_param
#define ROW_LR MXC__P_FLOAT(OP, lr, NULL, 1, 0, "learning rate")
#define ROW_WD MXC__P_FLOAT(OP, wd, "0", 1, 0, "weight decay: adds wd * weight to the gradient")
#define ROW_RESCALE \
    MXC__P_FLOAT(OP, rescale_grad, "1", 1, 0, "the gradient is multiplied by this first")
#define ROW_CLIP                                                                   \
    MXC__P_FLOAT(OP, clip_gradient, "-1", 1, 0,                                    \
                 "clip the rescaled gradient to [-clip_gradient, clip_gradient]; " \
                 "negative: no clipping")
#define ROW_LAZY                         \
    MXC__P_BOOL(OP, lazy_update, "True", \
                "accepted for MXNet compatibility; dense arrays update every row")

static const struct mxc__param sgd_params[] = {ROW_LR, ROW_WD, ROW_RESCALE, ROW_CLIP, ROW_LAZY};

/* one row per line, as in the other tables */
/* clang-format off */
static const struct mxc__param sgd_mom_params[] = {
    ROW_LR,
    MXC__P_FLOAT(OP, momentum, "0", 0, 1, "decay of the momentum state"),
    ROW_WD,
    ROW_RESCALE,
    ROW_CLIP,
    ROW_LAZY,
};
/* clang-format on */

static const struct mxc__param adam_params[] = {
    ROW_LR,
    MXC__P_FLOAT(OP, beta1, "0.9", 0, 1, "decay of the mean (first moment) state"),
    MXC__P_FLOAT(OP, beta2, "0.999", 0, 1, "decay of the var (second moment) state"),
    MXC__P_FLOAT(OP, epsilon, "1e-08", 0, 3.4e38, "added to sqrt(var) in the denominator"),
    ROW_WD,
    ROW_RESCALE,
    ROW_CLIP,
    ROW_LAZY,
};
#undef OP

static const char *const opt_inputs[] = {"weight", "grad", NULL};
static const char *const opt_outputs[] = {"output", NULL};
static const char *const sgd_mom_aux[] = {"mom", NULL};
static const char *const adam_aux[] = {"mean", "var", NULL};

/* ---- Shapes -------------------------------------------------------------------------- */

/* Shape inference for `op`: the weight, the gradient, every state and the output share one
 * shape, deduced from whichever is known (the weight first) and checked on the others. */
static int opt_shape(const char *op, const char *const *aux_names, mxc_shape *in, int num_in,
                     mxc_shape *out, mxc_shape *aux, int num_aux) {
    mxc_shape *args[2 + 2 + 1];
    const char *names[2 + 2 + 1];
    int n = 0;
    for (int i = 0; i < num_in && i < 2; i++) {
        args[n] = &in[i];
        names[n++] = opt_inputs[i];
    }
    for (int i = 0; aux && i < num_aux && i < 2; i++) {
        args[n] = &aux[i];
        names[n++] = aux_names[i];
    }
    args[n] = &out[0];
    names[n++] = opt_outputs[0];
    mxc_shape s = {0};
    for (int i = 0; i < n && s.ndim == 0; i++)
        s = *args[i];
    for (int i = 0; i < n; i++) {
        int rc = mxc__shape_assign(args[i], &s, op, names[i]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

static int sgd_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    (void)params, (void)num_out;
    return opt_shape("sgd_update", NULL, in, num_in, out, aux, num_aux);
}

static int sgd_mom_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    (void)params, (void)num_out;
    return opt_shape("sgd_mom_update", sgd_mom_aux, in, num_in, out, aux, num_aux);
}

static int adam_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    (void)params, (void)num_out;
    return opt_shape("adam_update", adam_aux, in, num_in, out, aux, num_aux);
}

/* ---- Kernels ------------------------------------------------------------------------- */

/* Writes v into *o as the output's req asks: overwrite, or accumulate with add. */
static inline void put(float *o, float v, bool add) { *o = add ? *o + v : v; }

/* The loops read the parameters from a local copy: stores to the float arrays cannot
 * change it, so nothing is reloaded per element and the loops vectorise. */

/* weight, grad, out: (n); out may be weight (in place). */
MXC__SIMD_KERNEL static int sgd_forward(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *w = c->in_data[0].data, *g = c->in_data[1].data;
    float *o = c->out_data[0].data;
    const int64_t n = c->out_data[0].size;
    const bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++)
        put(&o[i], mxc__sgd_step(&p, w[i], g[i]), add);
    return MXC_OK;
}

/* weight, grad, mom (state, updated), out: (n); out may be weight (in place). */
MXC__SIMD_KERNEL static int sgd_mom_forward(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const float *w = c->in_data[0].data, *g = c->in_data[1].data;
    float *mom = c->aux[0].data, *o = c->out_data[0].data;
    const int64_t n = c->out_data[0].size;
    const int req = c->req[0];
    const bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++) {
        const float v = mxc__sgd_mom_step(&p, w[i], g[i], &mom[i]);
        if (req != MXC__REQ_NULL)
            put(&o[i], v, add);
    }
    return MXC_OK;
}

/* weight, grad, mean and var (states, updated), out: (n); out may be weight (in place). */
MXC__SIMD_KERNEL static int adam_forward(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const float *w = c->in_data[0].data, *g = c->in_data[1].data;
    float *mean = c->aux[0].data, *var = c->aux[1].data, *o = c->out_data[0].data;
    const int64_t n = c->out_data[0].size;
    const int req = c->req[0];
    const bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++) {
        const float v = mxc__adam_step(&p, w[i], g[i], &mean[i], &var[i]);
        if (req != MXC__REQ_NULL)
            put(&o[i], v, add);
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
int mxc__sgd_update_gpu(const struct mxc__op_call *c);     /* optimizer_gpu.cu */
int mxc__sgd_mom_update_gpu(const struct mxc__op_call *c); /* optimizer_gpu.cu */
int mxc__adam_update_gpu(const struct mxc__op_call *c);    /* optimizer_gpu.cu */
#endif

/* ---- Definitions --------------------------------------------------------------------- */

const struct mxc__op_def mxc__op_sgd_update = {
    .name = "sgd_update",
    .description = "SGD step: out = weight - lr * (clip(rescale_grad * grad) + wd * weight)",
    .param_size = sizeof(struct mxc__opt_param),
    .params = sgd_params,
    .num_params = (int)MXC_ARRAY_SIZE(sgd_params),
    .inputs = opt_inputs,
    .outputs = opt_outputs,
    .infer_shape = sgd_shape,
    .inplace = MXC__INPLACE(0, 0),
    .forward_cpu = sgd_forward,
    .forward_gpu = MXC__GPU(mxc__sgd_update_gpu),
};

const struct mxc__op_def mxc__op_sgd_mom_update = {
    .name = "sgd_mom_update",
    .description = "momentum SGD step: mom = momentum * mom - lr * (clip(rescale_grad * grad) "
                   "+ wd * weight); out = weight + mom (mom updated in place)",
    .param_size = sizeof(struct mxc__opt_param),
    .params = sgd_mom_params,
    .num_params = (int)MXC_ARRAY_SIZE(sgd_mom_params),
    .inputs = opt_inputs,
    .outputs = opt_outputs,
    .aux = sgd_mom_aux,
    .infer_shape = sgd_mom_shape,
    .inplace = MXC__INPLACE(0, 0),
    .forward_cpu = sgd_mom_forward,
    .forward_gpu = MXC__GPU(mxc__sgd_mom_update_gpu),
};

const struct mxc__op_def mxc__op_adam_update = {
    .name = "adam_update",
    .description = "Adam step without bias correction: mean, var updated in place with "
                   "g = clip(rescale_grad * grad + wd * weight); "
                   "out = weight - lr * mean / (sqrt(var) + epsilon)",
    .param_size = sizeof(struct mxc__opt_param),
    .params = adam_params,
    .num_params = (int)MXC_ARRAY_SIZE(adam_params),
    .inputs = opt_inputs,
    .outputs = opt_outputs,
    .aux = adam_aux,
    .infer_shape = adam_shape,
    .inplace = MXC__INPLACE(0, 0),
    .forward_cpu = adam_forward,
    .forward_gpu = MXC__GPU(mxc__adam_update_gpu),
};
