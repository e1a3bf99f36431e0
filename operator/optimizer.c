/*
 * operator/optimizer.c — optimizer steps as operators, so parameter updates run on the
 * engine in place: the weight is input 0 and may be the output array too (req INPLACE),
 * the optimizer states (momentum; Adam's mean and var; RMSProp's n, ...) are auxiliary
 * states the kernel updates in place. MXNet 1.9.1's operators with its names and
 * parameters: sgd_update, sgd_mom_update, adam_update, nag_mom_update, rmsprop_update,
 * rmspropalex_update, ftrl_update, signsgd_update, signum_update, _adamw_update,
 * lamb_update_phase1 and lamb_update_phase2. The formulas, in MXNet's order of operations,
 * are the per-element steps of operator/optimizer.h (shared with the CUDA kernels of
 * operator/optimizer_gpu.cu) and docs/operators.md. Every tensor has the weight's shape
 * and is read as a flat (n) float32 array, except the (1) scalars: _adamw_update's
 * rescale_grad and lamb_update_phase2's norms r1 and r2. The states are updated even when
 * the output's req is null. Not differentiable.
 */
#include "operator/optimizer.h"
#include "operator/cast.h"
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
#define ROW_MOMENTUM MXC__P_FLOAT(OP, momentum, "0", 0, 1, "decay of the momentum state")
#define ROW_BETA1    MXC__P_FLOAT(OP, beta1, "0.9", 0, 1, "decay of the mean (first moment) state")
#define ROW_BETA2    MXC__P_FLOAT(OP, beta2, "0.999", 0, 1, "decay of the var (second moment) state")
#define ROW_EPSILON(def) \
    MXC__P_FLOAT(OP, epsilon, def, 0, 3.4e38, "added to the denominator, against division by 0")
#define ROW_GAMMA1 MXC__P_FLOAT(OP, gamma1, "0.95", 0, 1, "decay of the mean square state n")
#define ROW_CLIP_WEIGHTS                       \
    MXC__P_FLOAT(OP, clip_weights, "-1", 1, 0, \
                 "clip the new weight to [-clip_weights, clip_weights]; negative: no clipping")

/* one row per line, as in the other tables */
/* clang-format off */
static const struct mxc__param sgd_update_params[] = {
    ROW_LR, ROW_WD, ROW_RESCALE, ROW_CLIP, ROW_LAZY,
};

static const struct mxc__param sgd_mom_update_params[] = {
    ROW_LR, ROW_MOMENTUM, ROW_WD, ROW_RESCALE, ROW_CLIP, ROW_LAZY,
};

#define mp_sgd_update_params     sgd_update_params
#define mp_sgd_mom_update_params sgd_mom_update_params

static const struct mxc__param adam_update_params[] = {
    ROW_LR, ROW_BETA1, ROW_BETA2, ROW_EPSILON("1e-08"), ROW_WD, ROW_RESCALE, ROW_CLIP, ROW_LAZY,
};

static const struct mxc__param nag_mom_update_params[] = {
    ROW_LR, ROW_MOMENTUM, ROW_WD, ROW_RESCALE, ROW_CLIP,
};

static const struct mxc__param rmsprop_update_params[] = {
    ROW_LR, ROW_GAMMA1, ROW_EPSILON("1e-08"), ROW_WD, ROW_RESCALE, ROW_CLIP, ROW_CLIP_WEIGHTS,
};

static const struct mxc__param rmspropalex_update_params[] = {
    ROW_LR,
    ROW_GAMMA1,
    MXC__P_FLOAT(OP, gamma2, "0.9", 0, 1, "decay of the delta (momentum) state"),
    ROW_EPSILON("1e-08"),
    ROW_WD,
    ROW_RESCALE,
    ROW_CLIP,
    ROW_CLIP_WEIGHTS,
};

static const struct mxc__param ftrl_update_params[] = {
    ROW_LR,
    MXC__P_FLOAT(OP, lamda1, "0.01", 1, 0, "L1 regularisation: |z| up to lamda1 gives weight 0"),
    MXC__P_FLOAT(OP, beta, "1", 1, 0, "per-coordinate learning rate correlation"),
    ROW_WD,
    ROW_RESCALE,
    ROW_CLIP,
};

static const struct mxc__param signsgd_update_params[] = {
    ROW_LR, ROW_WD, ROW_RESCALE, ROW_CLIP,
};

static const struct mxc__param signum_update_params[] = {
    ROW_LR,
    ROW_MOMENTUM,
    ROW_WD,
    ROW_RESCALE,
    ROW_CLIP,
    MXC__P_FLOAT(OP, wd_lh, "0", 1, 0, "decoupled weight decay: weight *= 1 - lr * wd_lh"),
};

static const struct mxc__param adamw_update_params[] = {
    ROW_LR,
    ROW_BETA1,
    ROW_BETA2,
    ROW_EPSILON("1e-08"),
    ROW_WD,
    MXC__P_FLOAT(OP, eta, NULL, 1, 0, "learning rate schedule multiplier of the whole step"),
    ROW_CLIP,
};

static const struct mxc__param lamb_update_phase1_params[] = {
    ROW_BETA1,
    ROW_BETA2,
    ROW_EPSILON("1e-06"),
    MXC__P_INT(OP, t, NULL, 1, 2147483647, "the step number, from 1 (bias correction)"),
    MXC__P_BOOL(OP, bias_correction, "True", "divide mean and var by 1 - beta^t"),
    MXC__P_FLOAT(OP, wd, NULL, 1, 0, "weight decay: adds wd * weight to g"),
    ROW_RESCALE,
    ROW_CLIP,
};

static const struct mxc__param lamb_update_phase2_params[] = {
    ROW_LR,
    MXC__P_FLOAT(OP, lower_bound, "-1", 1, 0, "r1 is at least this; negative: no bound"),
    MXC__P_FLOAT(OP, upper_bound, "-1", 1, 0, "r1 is at most this; negative: no bound"),
};
/* clang-format on */
#undef OP

static const char *const opt_inputs[] = {"weight", "grad", NULL};
static const char *const adamw_inputs[] = {"weight", "grad", "rescale_grad", NULL};
static const char *const lamb2_inputs[] = {"weight", "g", "r1", "r2", NULL};
static const char *const opt_outputs[] = {"output", NULL};
static const char *const mom_aux[] = {"mom", NULL};
static const char *const adam_aux[] = {"mean", "var", NULL};
static const char *const rmsprop_aux[] = {"n", NULL};
static const char *const rmspropalex_aux[] = {"n", "g", "delta", NULL};
static const char *const ftrl_aux[] = {"z", "n", NULL};
static const char *const mp_sgd_aux[] = {"weight32", NULL};
static const char *const mp_sgd_mom_aux[] = {"mom", "weight32", NULL};

/* ---- Shapes -------------------------------------------------------------------------- */

/* Shape inference for `op`: the weight, the gradient, every state and the output share one
 * shape, deduced from whichever is known (the weight first) and checked on the others; the
 * last `num_scalar` inputs (rescale_grad, or r1 and r2) are (1). */
static int opt_shape(const char *op, const char *const *in_names, int num_scalar,
                     const char *const *aux_names, mxc_shape *in, int num_in, mxc_shape *out,
                     mxc_shape *aux, int num_aux) {
    mxc_shape *args[4 + 3 + 1];
    const char *names[4 + 3 + 1];
    int n = 0;
    const mxc_shape one = {.ndim = 1, .dims = {1}};
    for (int i = 0; i < num_in && i < 4; i++) {
        if (i >= num_in - num_scalar) {
            int rc = mxc__shape_assign(&in[i], &one, op, in_names[i]);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
        args[n] = &in[i];
        names[n++] = in_names[i];
    }
    for (int i = 0; aux && i < num_aux && i < 3; i++) {
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

/* The multi-precision updates' dtypes: weight, grad and output one float dtype (float16 the
 * point), the states and weight32 float32 (MXNet's MP_SGD_InferType). */
static int mp_type(const void *params, int *in, int num_in, int *out, int num_out, int *aux,
                   int num_aux) {
    (void)params, (void)num_in, (void)num_out;
    const char *op = num_aux > 1 ? "mp_sgd_mom_update" : "mp_sgd_update";
    int t = in[0] >= 0 ? in[0] : in[1] >= 0 ? in[1] : out[0];
    int rc = MXC_OK;
    if (t >= 0 && t != MXC_FLOAT16 && t != MXC_FLOAT32 && t != MXC_FLOAT64)
        return mxc__error(MXC_ENOTSUP,
                          "%s: weight of dtype %s (float16, float32 or float64 are "
                          "supported)",
                          op, mxc_dtype_name(t));
    if (t >= 0) {
        rc = mxc__type_assign(&in[0], t, op, "weight");
        rc = rc != MXC_OK ? rc : mxc__type_assign(&in[1], t, op, "grad");
        rc = rc != MXC_OK ? rc : mxc__type_assign(&out[0], t, op, "output");
    }
    for (int i = 0; i < num_aux && rc == MXC_OK; i++)
        rc = mxc__type_assign(&aux[i], MXC_FLOAT32, op, i == num_aux - 1 ? "weight32" : "mom");
    return rc;
}

/* ---- Kernels ------------------------------------------------------------------------- */

/* Writes v into *o as the output's req asks: overwrite, or accumulate with add. */
static inline void put(float *o, float v, bool add) { *o = add ? *o + v : v; }

/* One step over (n) elements: weight in_data[0], gradient in_data[1], `nst` states in aux
 * (updated), out (may be the weight: each element is loaded before it is stored);
 * `scale` >= 0: input `scale` holds rescale_grad (1). Always inlined into each operator's
 * kernel with constants for nst and step, so the loops vectorise. The parameters are a
 * local copy: stores to the float arrays cannot change them, nothing is reloaded per
 * element. */
static inline __attribute__((always_inline)) int
opt_map(const struct mxc__op_call *c, int nst, int scale,
        float (*step)(const struct mxc__opt_param *, float, float, float *)) {
    struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    if (scale >= 0)
        p.rescale_grad = *(const float *)c->in_data[scale].data;
    mxc__opt_prepare(&p);
    const float *w = c->in_data[0].data, *g = c->in_data[1].data;
    float *st[3] = {NULL, NULL, NULL}, *o = c->out_data[0].data;
    for (int j = 0; j < nst; j++)
        st[j] = c->aux[j].data;
    const int64_t n = c->out_data[0].size;
    const int req = c->req[0];
    const bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++) {
        float s[3] = {0, 0, 0};
        for (int j = 0; j < nst; j++)
            s[j] = st[j][i];
        const float v = step(&p, w[i], g[i], s);
        for (int j = 0; j < nst; j++)
            st[j][i] = s[j];
        if (req != MXC__REQ_NULL)
            put(&o[i], v, add);
    }
    return MXC_OK;
}

#define OPT_CPU_KERNEL(id, name, nst, step, scale)                           \
    MXC__SIMD_KERNEL static int id##_forward(const struct mxc__op_call *c) { \
        return opt_map(c, nst, scale, step);                                 \
    }
MXC__OPT_MAPS(OPT_CPU_KERNEL)
#undef OPT_CPU_KERNEL

/* weight, g, out: (n); r1, r2: (1); out may be weight (in place). */
MXC__SIMD_KERNEL static int lamb_update_phase2_forward(const struct mxc__op_call *c) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *w = c->in_data[0].data, *g = c->in_data[1].data;
    const float r1 = *(const float *)c->in_data[2].data, r2 = *(const float *)c->in_data[3].data;
    float *o = c->out_data[0].data;
    const int64_t n = c->out_data[0].size;
    const bool add = req == MXC__REQ_ADD;
    for (int64_t i = 0; i < n; i++)
        put(&o[i], mxc__lamb2_step(&p, w[i], g[i], r1, r2), add);
    return MXC_OK;
}

/* A multi-precision step over (n) elements: weight in_data[0] (not read: the master
 * copy is), gradient in_data[1] (float16, float32 or float64, read as float32), `nst`
 * states and then weight32 in aux (float32, updated), out (the weight's dtype, may be the
 * weight) = the new weight32 converted. */
static inline __attribute__((always_inline)) int mp_map(const struct mxc__op_call *c, int nst,
                                                        float (*step)(const struct mxc__opt_param *,
                                                                      float, float, float *)) {
    const struct mxc__opt_param p = *(const struct mxc__opt_param *)c->params;
    const struct mxc__tensor *g = &c->in_data[1], *o = &c->out_data[0];
    float *mom = nst ? c->aux[0].data : NULL, *w32 = c->aux[nst].data;
    const int req = c->req[0];
    for (int64_t i = 0; i < o->size; i++) {
        float s[1] = {nst ? mom[i] : 0.0f};
        const float w = step(&p, w32[i], mxc__elem_float(mxc__elem_load(g->data, g->dtype, i)), s);
        if (nst)
            mom[i] = s[0];
        w32[i] = w;
        if (req != MXC__REQ_NULL)
            mxc__elem_store(o->data, o->dtype, i, mxc__elem_of_float(w), req == MXC__REQ_ADD);
    }
    return MXC_OK;
}

#define MP_CPU_KERNEL(id, name, nst, step) \
    static int id##_forward(const struct mxc__op_call *c) { return mp_map(c, nst, step); }
MXC__MP_MAPS(MP_CPU_KERNEL)
#undef MP_CPU_KERNEL

#ifdef MXC_USE_CUDA
/* optimizer_gpu.cu */
#define OPT_GPU_DECL(id, name, nst, step, scale) int mxc__##id##_gpu(const struct mxc__op_call *c);
MXC__OPT_MAPS(OPT_GPU_DECL)
#undef OPT_GPU_DECL
#define MP_GPU_DECL(id, name, nst, step) int mxc__##id##_gpu(const struct mxc__op_call *c);
MXC__MP_MAPS(MP_GPU_DECL)
#undef MP_GPU_DECL
int mxc__lamb_update_phase2_gpu(const struct mxc__op_call *c);
#endif

/* ---- Definitions --------------------------------------------------------------------- */

/* Operator `def` named `name` with kernels id##_forward and mxc__##id##_gpu, the
 * parameter table id##_params, `ins` inputs of which the last `nscalar` are (1), states
 * `aux` (NULL: none), and `inplace` (the weight may be the output, or not); more fields
 * of the definition may follow (the multi-precision ones' types). */
/* clang-format off */
#define OPT_DEF(def, id, name_, desc, ins, nscalar, aux_, inplace_, ...)                 \
    static int id##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, \
                          int num_out, mxc_shape *aux, int num_aux) {                    \
        (void)params, (void)num_out;                                                     \
        return opt_shape(name_, ins, nscalar, aux_, in, num_in, out, aux, num_aux);      \
    }                                                                                    \
    const struct mxc__op_def def = {                                                     \
        .name = name_,                                                                   \
        .description = desc,                                                             \
        .param_size = sizeof(struct mxc__opt_param),                                     \
        .params = id##_params,                                                           \
        .num_params = (int)MXC_ARRAY_SIZE(id##_params),                                  \
        .inputs = ins,                                                                   \
        .outputs = opt_outputs,                                                          \
        .aux = aux_,                                                                     \
        .infer_shape = id##_shape,                                                       \
        .inplace = inplace_,                                                             \
        .forward_cpu = id##_forward,                                                     \
        .forward_gpu = MXC__GPU(mxc__##id##_gpu),                                        \
        __VA_ARGS__                                                                      \
    };
/* clang-format on */

#define WEIGHT_OUT MXC__INPLACE(0, 0)
#define NO_INPLACE \
    { 0, 0 }

OPT_DEF(mxc__op_sgd_update, sgd_update, "sgd_update",
        "SGD step: out = weight - lr * (clip(rescale_grad * grad) + wd * weight)", opt_inputs, 0,
        NULL, WEIGHT_OUT)
OPT_DEF(mxc__op_sgd_mom_update, sgd_mom_update, "sgd_mom_update",
        "momentum SGD step: mom = momentum * mom - lr * (clip(rescale_grad * grad) + wd * "
        "weight); out = weight + mom (mom updated in place)",
        opt_inputs, 0, mom_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_adam_update, adam_update, "adam_update",
        "Adam step without bias correction: mean, var updated in place with g = "
        "clip(rescale_grad * grad + wd * weight); out = weight - lr * mean / (sqrt(var) + "
        "epsilon)",
        opt_inputs, 0, adam_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_nag_mom_update, nag_mom_update, "nag_mom_update",
        "Nesterov momentum step: with g = clip(rescale_grad * grad), mom = momentum * mom + g + "
        "wd * weight; out = weight - lr * (momentum * mom + g + wd * weight)",
        opt_inputs, 0, mom_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_rmsprop_update, rmsprop_update, "rmsprop_update",
        "RMSProp step (Tieleman & Hinton): with g = clip(rescale_grad * grad + wd * weight), "
        "n = (1 - gamma1) g^2 + gamma1 n; out = clip_weights(weight - lr * g / sqrt(n + "
        "epsilon))",
        opt_inputs, 0, rmsprop_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_rmspropalex_update, rmspropalex_update, "rmspropalex_update",
        "centered RMSProp step (Graves): with g' = clip(rescale_grad * grad + wd * weight), "
        "n = (1 - gamma1) g'^2 + gamma1 n, g = (1 - gamma1) g' + gamma1 g, delta = gamma2 delta "
        "- lr * g' / sqrt(n - g^2 + epsilon); out = clip_weights(weight + delta)",
        opt_inputs, 0, rmspropalex_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_ftrl_update, ftrl_update, "ftrl_update",
        "FTRL-proximal step: with g = clip(rescale_grad * grad), z += g - (sqrt(n + g^2) - "
        "sqrt(n)) * weight / lr, n += g^2; out = (sign(z) lamda1 - z) / ((beta + sqrt(n)) / lr "
        "+ wd) where |z| > lamda1, else 0",
        opt_inputs, 0, ftrl_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_signsgd_update, signsgd_update, "signsgd_update",
        "signSGD step: out = (1 - lr * wd) * weight - lr * sign(grad)", opt_inputs, 0, NULL,
        WEIGHT_OUT)
OPT_DEF(mxc__op_signum_update, signum_update, "signum_update",
        "Signum step: mom = momentum * mom - (1 - momentum) * (wd * weight + clip(rescale_grad "
        "* grad)); out = (1 - lr * wd_lh) * weight + lr * sign(mom)",
        opt_inputs, 0, mom_aux, WEIGHT_OUT)
OPT_DEF(mxc__op__adamw_update, adamw_update, "_adamw_update",
        "AdamW step (decoupled weight decay), rescale_grad an input (1): with g = "
        "clip(grad * rescale_grad), mean and var as Adam; out = weight - eta * (lr * mean / "
        "(sqrt(var) + epsilon) + wd * weight); a rescale_grad not finite or 0 skips the step",
        adamw_inputs, 1, adam_aux, WEIGHT_OUT)
OPT_DEF(mxc__op_lamb_update_phase1, lamb_update_phase1, "lamb_update_phase1",
        "LAMB, first phase: mean and var as Adam with g = clip(grad * rescale_grad), bias "
        "corrected by 1 - beta^t; out = mean / (sqrt(var) + epsilon) + wd * weight",
        opt_inputs, 0, adam_aux, NO_INPLACE)
OPT_DEF(mxc__op_lamb_update_phase2, lamb_update_phase2, "lamb_update_phase2",
        "LAMB, second phase: r1 (|weight|) within [lower_bound, upper_bound]; out = weight - "
        "lr * r1 / r2 * g (r1 or r2 zero: weight - lr * g)",
        lamb2_inputs, 2, NULL, WEIGHT_OUT)
#define MP_DTYPES ((1u << MXC_FLOAT16) | (1u << MXC_FLOAT32) | (1u << MXC_FLOAT64))
OPT_DEF(mxc__op_mp_sgd_update, mp_sgd_update, "mp_sgd_update",
        "multi-precision SGD step: weight32 = (1 - lr * wd) * weight32 - lr * "
        "clip(rescale_grad * grad) (float32, in place); out = weight32 in the weight's dtype",
        opt_inputs, 0, mp_sgd_aux, WEIGHT_OUT, .infer_type = mp_type, .dtypes = MP_DTYPES)
OPT_DEF(mxc__op_mp_sgd_mom_update, mp_sgd_mom_update, "mp_sgd_mom_update",
        "multi-precision momentum SGD step: mom = momentum * mom - lr * wd * weight32 - lr * "
        "clip(rescale_grad * grad); weight32 += mom (float32, in place); out = weight32 in the "
        "weight's dtype",
        opt_inputs, 0, mp_sgd_mom_aux, WEIGHT_OUT, .infer_type = mp_type, .dtypes = MP_DTYPES)
