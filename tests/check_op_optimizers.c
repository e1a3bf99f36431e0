/*
 * tests/check_op_optimizers.c — the optimizer family: sgd_update, sgd_mom_update,
 * adam_update, nag_mom_update, rmsprop_update, rmspropalex_update, ftrl_update,
 * signsgd_update, signum_update, _adamw_update, lamb_update_phase1 and lamb_update_phase2.
 * Three successive steps per case against MXNet 1.9.1 (weights and states
 * after every step; tests/data/ops/optimizers, made by scripts/gen_op_refs_optimizers.py),
 * with and without weight decay, rescaling and clipping; write, add-to and null requests;
 * shape inference (deduction both ways, conflicts); parameter tables (defaults, bounds,
 * missing and unknown keys); and the same steps through mxc_imperative_invoke with the
 * output being the weight array itself (in place), the states updated in place and the
 * engine ordering successive updates. The operators are not differentiable (no gradient
 * check).
 */
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 3
#define RTOL  1e-5
#define ATOL  1e-6

static mxc_shape shp(int ndim, int64_t a, int64_t b, int64_t c) {
    int64_t dims[3] = {a, b, c};
    return mxc_shape_make(ndim, dims);
}

/* ---- Reference cases (parameters as in scripts/gen_op_refs_optimizers.py) ------------ */

struct ref_case {
    const char *file; /* tests/data/ops/optimizers/<file>.params */
    const char *op;
    int num_in; /* weight, grad, and _adamw_update's rescale_grad or LAMB's r1, r2 */
    int num_aux;
    const char *kv[18]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"sgd_plain", "sgd_update", 2, 0, {"lr", "0.1"}},
    {"sgd_wd_rescale",
     "sgd_update",
     2,
     0,
     {"lr", "0.05", "wd", "0.1", "rescale_grad", "0.5", "lazy_update", "False"}},
    {"sgd_clip",
     "sgd_update",
     2,
     0,
     {"lr", "0.1", "wd", "0.2", "rescale_grad", "2.0", "clip_gradient", "0.3"}},
    {"mom_plain", "sgd_mom_update", 2, 1, {"lr", "0.1", "momentum", "0.9"}},
    {"mom_nomomentum", "sgd_mom_update", 2, 1, {"lr", "0.2", "wd", "0.01"}},
    {"mom_wd_clip",
     "sgd_mom_update",
     2,
     1,
     {"lr", "0.05", "momentum", "0.8", "wd", "0.3", "rescale_grad", "1.5", "clip_gradient", "0.4"}},
    {"adam_default", "adam_update", 2, 2, {"lr", "0.01"}},
    {"adam_wd_rescale",
     "adam_update",
     2,
     2,
     {"lr", "0.05", "beta1", "0.8", "beta2", "0.99", "epsilon", "1e-06", "wd", "0.1",
      "rescale_grad", "0.5"}},
    {"adam_clip",
     "adam_update",
     2,
     2,
     {"lr", "0.02", "wd", "0.5", "rescale_grad", "2.0", "clip_gradient", "0.2"}},
    {"nag_plain", "nag_mom_update", 2, 1, {"lr", "0.1", "momentum", "0.9"}},
    {"nag_wd_clip",
     "nag_mom_update",
     2,
     1,
     {"lr", "0.05", "momentum", "0.8", "wd", "0.3", "rescale_grad", "1.5", "clip_gradient", "0.4"}},
    {"rmsprop_plain", "rmsprop_update", 2, 1, {"lr", "0.01"}},
    {"rmsprop_all",
     "rmsprop_update",
     2,
     1,
     {"lr", "0.02", "gamma1", "0.9", "epsilon", "1e-06", "wd", "0.1", "rescale_grad", "2.0",
      "clip_gradient", "0.5", "clip_weights", "0.8"}},
    {"rmspropalex_plain", "rmspropalex_update", 2, 3, {"lr", "0.01"}},
    {"rmspropalex_all",
     "rmspropalex_update",
     2,
     3,
     {"lr", "0.02", "gamma1", "0.8", "gamma2", "0.7", "epsilon", "1e-06", "wd", "0.1",
      "rescale_grad", "0.5", "clip_gradient", "0.3", "clip_weights", "0.9"}},
    {"ftrl_plain", "ftrl_update", 2, 2, {"lr", "0.1"}},
    {"ftrl_all",
     "ftrl_update",
     2,
     2,
     {"lr", "0.05", "lamda1", "0.02", "beta", "0.5", "wd", "0.1", "rescale_grad", "2.0",
      "clip_gradient", "1.0"}},
    {"signsgd_plain", "signsgd_update", 2, 0, {"lr", "0.1"}},
    {"signsgd_wd",
     "signsgd_update",
     2,
     0,
     {"lr", "0.05", "wd", "0.2", "rescale_grad", "3.0", "clip_gradient", "0.1"}},
    {"signum_plain", "signum_update", 2, 1, {"lr", "0.1", "momentum", "0.9"}},
    {"signum_all",
     "signum_update",
     2,
     1,
     {"lr", "0.05", "momentum", "0.8", "wd", "0.1", "rescale_grad", "2.0", "clip_gradient", "0.5",
      "wd_lh", "0.01"}},
    {"adamw_plain", "_adamw_update", 3, 2, {"lr", "0.01", "eta", "1.0"}},
    {"adamw_all",
     "_adamw_update",
     3,
     2,
     {"lr", "0.02", "beta1", "0.8", "beta2", "0.99", "epsilon", "1e-06", "wd", "0.1", "eta", "0.5",
      "clip_gradient", "0.3"}},
    /* rescale_grad 0.5, then inf and 0: the last two steps change nothing */
    {"adamw_skip", "_adamw_update", 3, 2, {"lr", "0.05", "wd", "0.1", "eta", "1.0"}},
    {"lamb1_plain", "lamb_update_phase1", 2, 2, {"t", "1", "wd", "0.0"}},
    {"lamb1_all",
     "lamb_update_phase1",
     2,
     2,
     {"beta1", "0.8", "beta2", "0.99", "epsilon", "1e-05", "t", "3", "wd", "0.1", "rescale_grad",
      "2.0", "clip_gradient", "0.5"}},
    {"lamb1_nobias",
     "lamb_update_phase1",
     2,
     2,
     {"t", "2", "bias_correction", "False", "wd", "0.05"}},
    {"lamb2_plain", "lamb_update_phase2", 4, 0, {"lr", "0.1"}},
    {"lamb2_bounds",
     "lamb_update_phase2",
     4,
     0,
     {"lr", "0.05", "lower_bound", "2.5", "upper_bound", "2.6"}},
    /* r1 0 in step 0, r2 0 in steps 1 and 2: no trust ratio */
    {"lamb2_zero", "lamb_update_phase2", 4, 0, {"lr", "0.1"}},
};

#define NUM_CASES ((int)MXC_ARRAY_SIZE(ref_cases))

static const char *case_file(const struct ref_case *c, char *buf, size_t size) {
    snprintf(buf, size, "ops/optimizers/%s.params", c->file);
    return buf;
}

/* Array `fmt` (with the step k) of case c. */
static struct mxct_tensor ref(const struct ref_case *c, const char *fmt, int k) {
    char file[256], name[32];
    snprintf(name, sizeof name, fmt, k);
    return mxct_ref_load(case_file(c, file, sizeof file), name);
}

static void expect_step(const struct mxct_tensor *got, const struct ref_case *c, const char *fmt,
                        int k) {
    struct mxct_tensor want = ref(c, fmt, k);
    char what[128], name[32];
    snprintf(name, sizeof name, fmt, k);
    snprintf(what, sizeof what, "%s %s (step %d) vs MXNet", c->file, name, k);
    ck_assert_int_eq(mxc_shape_size(&got->shape), mxc_shape_size(&want.shape));
    mxct_expect_close(got, want.data, RTOL, ATOL, what);
    mxct_tensors_free(&want, 1);
}

static const char *const aux_fmt[] = {"aux0_%d", "aux1_%d", "aux2_%d"};
static const char *const aux0_name[] = {"aux0", "aux1", "aux2"};
static const char *const in_fmt[] = {"in0_%d", "in1_%d", "in2_%d", "in3_%d"};

/* Whether step k + 1 starts from step k's output: every operator but lamb_update_phase1,
 * whose output is its g (the weight stays). */
static bool carries_weight(const struct ref_case *c) {
    return strcmp(c->op, "lamb_update_phase1") != 0;
}

/* Loads case c's states before the first step into aux. */
static void load_states(const struct ref_case *c, struct mxct_tensor *aux) {
    for (int j = 0; j < c->num_aux; j++)
        aux[j] = ref(c, aux0_name[j], 0);
}

/* Three steps through the kernels: each step's output weight is the next step's input,
 * the states carry over in place. Weights and states are compared after every step. */
START_TEST(test_reference_steps) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[9], *vals[9];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in[4], aux[3], out[1];
    in[0] = ref(c, "in0", 0);
    load_states(c, aux);
    for (int k = 0; k < STEPS; k++) {
        for (int j = 1; j < c->num_in; j++)
            in[j] = ref(c, in_fmt[j], k);
        int rc = mxct_op_forward(c->op, kv, true, in, c->num_in, c->num_aux ? aux : NULL, out);
        ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
        expect_step(&out[0], c, "out0_%d", k);
        for (int j = 0; j < c->num_aux; j++)
            expect_step(&aux[j], c, aux_fmt[j], k);
        mxct_tensors_free(&in[1], c->num_in - 1);
        if (carries_weight(c)) {
            mxct_tensors_free(&in[0], 1);
            in[0] = out[0]; /* the next step starts from this step's weight */
        } else {
            mxct_tensors_free(out, 1);
        }
    }
    mxct_tensors_free(in, 1);
    mxct_tensors_free(aux, c->num_aux);
}
END_TEST

/* ---- Requests: add-to, null and in place, through the kernel directly ---------------- */

static struct mxc__tensor view(const struct mxct_tensor *t) {
    return (struct mxc__tensor){t->data, t->shape, MXC_FLOAT32, mxc_cpu(),
                                mxc_shape_size(&t->shape)};
}

/* Runs case c's first step with request `req` onto `out` (preset by the caller; for
 * MXC__REQ_INPLACE `out` is ignored and the weight is written). States are updated. */
static void run_step0(const struct ref_case *c, int req, struct mxct_tensor *w,
                      struct mxct_tensor *aux, struct mxct_tensor *out) {
    const char *keys[9], *vals[9];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    const struct mxc__op_def *def = mxc__op_find(c->op);
    ck_assert_ptr_nonnull(def);
    _Alignas(16) unsigned char params[1024];
    ck_assert_int_eq(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params), MXC_OK);
    struct mxct_tensor more[4];
    struct mxc__tensor tin[4] = {view(w)}, taux[3], tout[1];
    for (int j = 1; j < c->num_in; j++) {
        more[j] = ref(c, in_fmt[j], 0);
        tin[j] = view(&more[j]);
    }
    tout[0] = req == MXC__REQ_INPLACE ? tin[0] : view(out);
    for (int j = 0; j < c->num_aux; j++)
        taux[j] = view(&aux[j]);
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {.rctx = &rctx,
                                .is_train = true,
                                .params = params,
                                .in_data = tin,
                                .num_in = c->num_in,
                                .out_data = tout,
                                .num_out = 1,
                                .aux = taux,
                                .num_aux = c->num_aux,
                                .req = &req};
    ck_assert_int_eq(def->forward_cpu(&call), MXC_OK);
    mxct_tensors_free(&more[1], c->num_in - 1);
}

START_TEST(test_requests) {
    const struct ref_case *c = &ref_cases[_i];
    struct mxct_tensor w = ref(c, "in0", 0), aux[3];
    struct mxct_tensor want = ref(c, "out0_%d", 0);
    struct mxct_tensor out = mxct_tensor_from(w.shape, NULL);
    const int64_t n = mxc_shape_size(&w.shape);
    char what[128];

    /* add-to: out = 1 + new weight; the states still take exactly one step */
    load_states(c, aux);
    for (int64_t i = 0; i < n; i++)
        out.data[i] = 1.0f;
    run_step0(c, MXC__REQ_ADD, &w, aux, &out);
    for (int64_t i = 0; i < n; i++)
        out.data[i] -= 1.0f;
    snprintf(what, sizeof what, "%s add-to request", c->file);
    mxct_expect_close(&out, want.data, RTOL, 2 * ATOL, what);
    for (int j = 0; j < c->num_aux; j++)
        expect_step(&aux[j], c, aux_fmt[j], 0);
    mxct_tensors_free(aux, c->num_aux);

    /* null: the output is untouched, the states are updated anyway */
    load_states(c, aux);
    for (int64_t i = 0; i < n; i++)
        out.data[i] = 7.0f;
    run_step0(c, MXC__REQ_NULL, &w, aux, &out);
    for (int64_t i = 0; i < n; i++)
        ck_assert_float_eq(out.data[i], 7.0f);
    for (int j = 0; j < c->num_aux; j++)
        expect_step(&aux[j], c, aux_fmt[j], 0);
    mxct_tensors_free(aux, c->num_aux);

    /* in place: the output is the weight buffer itself (where the operator allows it) */
    load_states(c, aux);
    if (!mxc__op_find(c->op)->inplace.in1) {
        mxct_tensors_free(aux, c->num_aux);
        goto done;
    }
    run_step0(c, MXC__REQ_INPLACE, &w, aux, NULL);
    snprintf(what, sizeof what, "%s in-place request", c->file);
    mxct_expect_close(&w, want.data, RTOL, ATOL, what);
    for (int j = 0; j < c->num_aux; j++)
        expect_step(&aux[j], c, aux_fmt[j], 0);
    mxct_tensors_free(aux, c->num_aux);
done:
    mxct_tensors_free(&out, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(&w, 1);
}
END_TEST

/* Element-wise formulas on a handful of hand-checked values (independent of MXNet). */
START_TEST(test_formulas) {
    float w[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.5f, 4.0f, -3.0f};
    mxc_shape s = shp(1, 3, 0, 0);
    struct mxct_tensor in[2] = {mxct_tensor_from(s, w), mxct_tensor_from(s, g)}, out[1];
    /* sgd: g' = clip(2 g, 1) + 0.5 w = (1.5, 0, -0.75); out = w - 0.1 g' */
    ck_assert_int_eq(mxct_op_forward("sgd_update",
                                     MXCT_KV("lr", "0.1", "wd", "0.5", "rescale_grad", "2",
                                             "clip_gradient", "1"),
                                     false, in, 2, NULL, out),
                     MXC_OK);
    const float sgd[3] = {0.85f, -2.0f, 0.575f};
    mxct_expect_close(&out[0], sgd, 1e-6, 1e-7, "sgd_update by hand");
    mxct_tensors_free(out, 1);

    /* adam: g' = clip(g + 0.5 w, 1) = (1, 1, -1); mean = 0.1 g', var = 0.001 g'²;
     * out = w - 0.1 * mean / (sqrt(var) + 0) = w - 0.1 * 0.1 / sqrt(0.001) * sign(g') */
    struct mxct_tensor st[2] = {mxct_tensor_from(s, NULL), mxct_tensor_from(s, NULL)};
    ck_assert_int_eq(
        mxct_op_forward("adam_update",
                        MXCT_KV("lr", "0.1", "wd", "0.5", "clip_gradient", "1", "epsilon", "0"),
                        false, in, 2, st, out),
        MXC_OK);
    const float step = 0.01f / sqrtf(0.001f);
    const float adam[3] = {1.0f - step, -2.0f - step, 0.5f + step};
    const float mean[3] = {0.1f, 0.1f, -0.1f}, var[3] = {0.001f, 0.001f, 0.001f};
    mxct_expect_close(&out[0], adam, 1e-5, 1e-7, "adam_update by hand (no bias correction)");
    mxct_expect_close(&st[0], mean, 1e-6, 1e-8, "adam_update mean by hand");
    /* 1 - beta2 is 0.00099998713 in float32, as in MXNet */
    mxct_expect_close(&st[1], var, 5e-5, 1e-9, "adam_update var by hand");
    mxct_tensors_free(out, 1);
    mxct_tensors_free(st, 2);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Shape inference ----------------------------------------------------------------- */

/* Every operator of the family: its inputs (the last num_scalar of them (1)), states, the
 * name of its last state, and the parameters it needs. */
static const struct op_case {
    const char *op;
    int num_in, num_scalar, num_aux;
    const char *last_aux;
    const char *kv[4];
} ops[] = {
    {"sgd_update", 2, 0, 0, NULL, {"lr", "0.1"}},
    {"sgd_mom_update", 2, 0, 1, "mom", {"lr", "0.1"}},
    {"adam_update", 2, 0, 2, "var", {"lr", "0.1"}},
    {"nag_mom_update", 2, 0, 1, "mom", {"lr", "0.1"}},
    {"rmsprop_update", 2, 0, 1, "n", {"lr", "0.1"}},
    {"rmspropalex_update", 2, 0, 3, "delta", {"lr", "0.1"}},
    {"ftrl_update", 2, 0, 2, "n", {"lr", "0.1"}},
    {"signsgd_update", 2, 0, 0, NULL, {"lr", "0.1"}},
    {"signum_update", 2, 0, 1, "mom", {"lr", "0.1"}},
    {"_adamw_update", 3, 1, 2, "var", {"lr", "0.1", "eta", "1"}},
    {"lamb_update_phase1", 2, 0, 2, "var", {"t", "1", "wd", "0"}},
    {"lamb_update_phase2", 4, 2, 0, NULL, {"lr", "0.1"}},
};

#define NUM_OPS ((int)MXC_ARRAY_SIZE(ops))

START_TEST(test_shape) {
    const struct op_case *o = &ops[_i];
    const char *op = o->op;
    const char *keys[2] = {o->kv[0], o->kv[2]}, *vals[2] = {o->kv[1], o->kv[3]};
    struct mxct_params kv = {o->kv[2] ? 2 : 1, keys, vals};
    const mxc_shape s = shp(2, 3, 5, 0), one = shp(1, 1, 0, 0);
    const int naux = mxc__op_num_aux(mxct_op_def(op)), nfull = o->num_in - o->num_scalar;
    ck_assert_int_eq(naux, o->num_aux);

    /* from the weight to everything else; the scalars are (1) */
    mxc_shape in[4] = {s}, aux[3] = {{0}}, out = {0};
    ck_assert_int_eq(mxct_op_infer_aux(op, kv, in, o->num_in, &out, 1, aux, o->num_aux), MXC_OK);
    mxct_expect_shape(&in[1], &s, op);
    mxct_expect_shape(&out, &s, op);
    for (int j = nfull; j < o->num_in; j++)
        mxct_expect_shape(&in[j], &one, op);
    for (int j = 0; j < naux; j++)
        mxct_expect_shape(&aux[j], &s, op);

    /* backwards: from the output (or a state) to the weight and gradient */
    mxc_shape in2[4] = {{0}}, aux2[3] = {{0}}, out2 = s;
    ck_assert_int_eq(mxct_op_infer_aux(op, kv, in2, o->num_in, &out2, 1, aux2, o->num_aux), MXC_OK);
    mxct_expect_shape(&in2[0], &s, op);
    mxct_expect_shape(&in2[1], &s, op);
    for (int j = 0; j < naux; j++)
        mxct_expect_shape(&aux2[j], &s, op);
    if (naux) {
        mxc_shape in3[4] = {{0}}, aux3[3] = {{0}, {0}, {0}}, out3 = {0};
        aux3[naux - 1] = s;
        ck_assert_int_eq(mxct_op_infer_aux(op, kv, in3, o->num_in, &out3, 1, aux3, o->num_aux),
                         MXC_OK);
        mxct_expect_shape(&in3[0], &s, op);
        mxct_expect_shape(&out3, &s, op);
    }

    /* nothing known: no error, nothing deduced but the scalars */
    mxc_shape in4[4] = {{0}}, aux4[3] = {{0}}, out4 = {0};
    ck_assert_int_eq(mxct_op_infer_aux(op, kv, in4, o->num_in, &out4, 1, aux4, o->num_aux), MXC_OK);
    ck_assert_int_eq(in4[0].ndim + in4[1].ndim + out4.ndim + aux4[0].ndim, 0);

    /* conflicts name the operator, the argument and both shapes */
    const char *grad_name = strcmp(op, "lamb_update_phase2") == 0 ? "g" : "grad";
    mxc_shape bad[4] = {s, shp(2, 3, 4, 0)}, a5[3] = {{0}}, o5 = {0};
    mxct_expect_error(mxct_op_infer_aux(op, kv, bad, o->num_in, &o5, 1, a5, o->num_aux), MXC_ESHAPE,
                      MXCT_NEEDLES(op, grad_name, "(3, 4)", "(3, 5)"));
    mxc_shape in6[4] = {s}, a6[3] = {{0}}, o6 = shp(1, 15, 0, 0);
    mxct_expect_error(mxct_op_infer_aux(op, kv, in6, o->num_in, &o6, 1, a6, o->num_aux), MXC_ESHAPE,
                      MXCT_NEEDLES(op, "output", "(15)"));
    if (naux) {
        mxc_shape in7[4] = {s}, a7[3] = {s, s, s}, o7 = {0};
        a7[naux - 1] = shp(3, 3, 5, 1);
        mxct_expect_error(mxct_op_infer_aux(op, kv, in7, o->num_in, &o7, 1, a7, o->num_aux),
                          MXC_ESHAPE, MXCT_NEEDLES(op, o->last_aux, "(3, 5, 1)", "(3, 5)"));
    }
    if (o->num_scalar) {
        mxc_shape in8[4] = {s}, a8[3] = {{0}}, o8 = {0};
        in8[o->num_in - 1] = shp(1, 2, 0, 0);
        mxct_expect_error(mxct_op_infer_aux(op, kv, in8, o->num_in, &o8, 1, a8, o->num_aux),
                          MXC_ESHAPE, MXCT_NEEDLES(op, "(2)", "(1)"));
    }
}
END_TEST

/* ---- Parameters ---------------------------------------------------------------------- */

START_TEST(test_params) {
    struct mxct_params lr = MXCT_KV("lr", "0.01");
    for (int i = 0; i < 3; i++) {
        mxct_expect_param(ops[i].op, lr, "lr", "0.01");
        mxct_expect_param(ops[i].op, lr, "wd", "0");
        mxct_expect_param(ops[i].op, lr, "rescale_grad", "1");
        mxct_expect_param(ops[i].op, lr, "clip_gradient", "-1");
        mxct_expect_param(ops[i].op, lr, "lazy_update", "True");
        mxct_expect_param(ops[i].op, MXCT_KV("lr", "1", "lazy_update", "False"), "lazy_update",
                          "False");
    }
    mxct_expect_param("sgd_mom_update", lr, "momentum", "0");
    mxct_expect_param("adam_update", lr, "beta1", "0.9");
    mxct_expect_param("adam_update", lr, "beta2", "0.999");
    mxct_expect_param("adam_update", lr, "epsilon", "1e-08");
    /* the later operators' defaults, as MXNet 1.9.1 prints them */
    mxct_expect_param("nag_mom_update", lr, "momentum", "0");
    mxct_expect_param("rmsprop_update", lr, "gamma1", "0.95");
    mxct_expect_param("rmsprop_update", lr, "epsilon", "1e-08");
    mxct_expect_param("rmsprop_update", lr, "clip_weights", "-1");
    mxct_expect_param("rmspropalex_update", lr, "gamma2", "0.9");
    mxct_expect_param("ftrl_update", lr, "lamda1", "0.01");
    mxct_expect_param("ftrl_update", lr, "beta", "1");
    mxct_expect_param("signum_update", lr, "wd_lh", "0");
    mxct_expect_param("_adamw_update", MXCT_KV("lr", "0.1", "eta", "0.5"), "eta", "0.5");
    mxct_expect_param("lamb_update_phase1", MXCT_KV("t", "4", "wd", "0"), "epsilon", "1e-06");
    mxct_expect_param("lamb_update_phase1", MXCT_KV("t", "4", "wd", "0"), "bias_correction",
                      "True");
    mxct_expect_param("lamb_update_phase1", MXCT_KV("t", "4", "wd", "0"), "t", "4");
    mxct_expect_param("lamb_update_phase2", lr, "lower_bound", "-1");
    mxct_expect_param("lamb_update_phase2", lr, "upper_bound", "-1");

    mxc_shape in[4] = {{0}}, aux[3] = {{0}}, out = {0};
    for (int i = 0; i < NUM_OPS; i++)
        if (strcmp(ops[i].op, "lamb_update_phase1") != 0)
            mxct_expect_error(mxct_op_infer_aux(ops[i].op, MXCT_KV("eta", "0.1"), in, ops[i].num_in,
                                                &out, 1, aux, ops[i].num_aux),
                              MXC_EINVAL, MXCT_NEEDLES(ops[i].op, "lr"));
    mxct_expect_error(
        mxct_op_infer_aux("_adamw_update", MXCT_KV("lr", "0.1"), in, 3, &out, 1, aux, 2),
        MXC_EINVAL, MXCT_NEEDLES("_adamw_update", "eta"));
    mxct_expect_error(
        mxct_op_infer_aux("lamb_update_phase1", MXCT_KV("wd", "0.1"), in, 2, &out, 1, aux, 2),
        MXC_EINVAL, MXCT_NEEDLES("lamb_update_phase1", "t"));
    mxct_expect_error(
        mxct_op_infer_aux("lamb_update_phase1", MXCT_KV("t", "1"), in, 2, &out, 1, aux, 2),
        MXC_EINVAL, MXCT_NEEDLES("lamb_update_phase1", "wd"));
    mxct_expect_error(mxct_op_infer_aux("lamb_update_phase1", MXCT_KV("t", "0", "wd", "0"), in, 2,
                                        &out, 1, aux, 2),
                      MXC_EINVAL, MXCT_NEEDLES("lamb_update_phase1", "t"));
    mxct_expect_error(mxct_op_infer_aux("rmsprop_update", MXCT_KV("lr", "0.1", "gamma1", "1.5"), in,
                                        2, &out, 1, aux, 1),
                      MXC_EINVAL, MXCT_NEEDLES("gamma1"));
    mxct_expect_error(mxct_op_infer_aux("rmsprop_update", MXCT_KV("lr", "0.1", "rho", "0.5"), in, 2,
                                        &out, 1, aux, 1),
                      MXC_EINVAL, MXCT_NEEDLES("rho", "gamma1", "clip_weights"));
    mxct_expect_error(mxct_op_infer_aux("signum_update", MXCT_KV("lr", "0.1", "momentum", "-1"), in,
                                        2, &out, 1, aux, 1),
                      MXC_EINVAL, MXCT_NEEDLES("momentum"));
    mxct_expect_error(mxct_op_infer_aux("sgd_update", MXCT_KV("lr", "0.1", "momentum", "0.9"), in,
                                        2, &out, 1, aux, 0),
                      MXC_EINVAL, MXCT_NEEDLES("momentum", "clip_gradient", "lazy_update"));
    mxct_expect_error(mxct_op_infer_aux("sgd_mom_update", MXCT_KV("lr", "0.1", "momentum", "1.5"),
                                        in, 2, &out, 1, aux, 1),
                      MXC_EINVAL, MXCT_NEEDLES("momentum"));
    mxct_expect_error(mxct_op_infer_aux("adam_update", MXCT_KV("lr", "0.1", "beta1", "-0.1"), in, 2,
                                        &out, 1, aux, 2),
                      MXC_EINVAL, MXCT_NEEDLES("beta1"));
    mxct_expect_error(mxct_op_infer_aux("adam_update", MXCT_KV("lr", "0.1", "beta2", "2"), in, 2,
                                        &out, 1, aux, 2),
                      MXC_EINVAL, MXCT_NEEDLES("beta2"));
    mxct_expect_error(mxct_op_infer_aux("adam_update", MXCT_KV("lr", "0.1", "epsilon", "-1e-8"), in,
                                        2, &out, 1, aux, 2),
                      MXC_EINVAL, MXCT_NEEDLES("epsilon"));
    mxct_expect_error(
        mxct_op_infer_aux("adam_update", MXCT_KV("lr", "fast"), in, 2, &out, 1, aux, 2), MXC_EINVAL,
        MXCT_NEEDLES("lr"));

    mxc_op_info info;
    for (int i = 0; i < NUM_OPS; i++) {
        ck_assert_int_eq(mxc_op_get_info(ops[i].op, &info), MXC_OK);
        ck_assert_int_eq(info.differentiable, 0);
        ck_assert_int_eq(info.num_inputs, ops[i].num_in);
        ck_assert_int_eq(info.num_aux, ops[i].num_aux);
        ck_assert_int_eq(info.num_outputs, 1);
    }
}
END_TEST

/* ---- Through the engine -------------------------------------------------------------- */

static void expect_array(const mxc_ndarray *a, const struct ref_case *c, const char *fmt, int k) {
    struct mxct_tensor want = ref(c, fmt, k);
    mxc_shape s;
    ck_assert_int_eq(mxc_nd_get_shape(a, &s), MXC_OK);
    mxct_expect_shape(&s, &want.shape, c->file);
    struct mxct_tensor got = mxct_tensor_from(s, NULL);
    ck_assert_int_eq(
        mxc_nd_sync_copy_to_cpu(a, got.data, (size_t)mxc_shape_size(&s) * sizeof(float)), MXC_OK);
    char what[128], name[32];
    snprintf(name, sizeof name, fmt, k);
    snprintf(what, sizeof what, "%s %s through mxc_imperative_invoke", c->file, name);
    mxct_expect_close(&got, want.data, RTOL, ATOL, what);
    mxct_tensors_free(&got, 1);
    mxct_tensors_free(&want, 1);
}

/* MXNet's nd.<op>(weight, grad, states..., out=weight) three times in a row, pushed without
 * waiting: the weight array is input and output (in place), the states are updated in place,
 * and the engine must order the steps through the weight's and states' variables. Step 0's
 * gradient comes out of a 50 ms `_sleep`, so a step that ran out of order would run first
 * and be caught. */
START_TEST(test_invoke_in_place) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[9], *vals[9];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    const bool carry = carries_weight(c);
    struct mxct_tensor w = ref(c, "in0", 0);
    mxc_ndarray *weight = mxct_array_of(&w), *state[3] = {NULL, NULL, NULL};
    mxc_ndarray *more[STEPS][4] = {{NULL}}, *result = NULL;
    mxct_tensors_free(&w, 1);
    for (int j = 0; j < c->num_aux; j++) {
        struct mxct_tensor t = ref(c, aux0_name[j], 0);
        state[j] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
    for (int k = 0; k < STEPS; k++)
        for (int j = 1; j < c->num_in; j++) {
            struct mxct_tensor t = ref(c, in_fmt[j], k);
            more[k][j] = mxct_array_of(&t);
            mxct_tensors_free(&t, 1);
        }
    mxc_ndarray *slow = NULL;
    const char *sk[] = {"seconds"}, *sv[] = {"0.05"};
    ck_assert_int_eq(mxc_imperative_invoke("_sleep", 1, sk, sv, 1, &more[0][1], 1, &slow, 0),
                     MXC_OK);
    for (int k = 0; k < STEPS; k++) {
        /* mxc's order: the arguments, then the states */
        mxc_ndarray *args[7] = {weight, k ? more[k][1] : slow};
        for (int j = 2; j < c->num_in; j++)
            args[j] = more[k][j];
        for (int j = 0; j < c->num_aux; j++)
            args[c->num_in + j] = state[j];
        mxc_nd_free(result);
        mxc_ndarray *outs[1] = {carry ? weight : NULL};
        int rc = mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, c->num_in + c->num_aux,
                                       args, 1, outs, 1);
        ck_assert_msg(rc == MXC_OK, "%s step %d: %s", c->file, k, mxc_last_error());
        if (carry)
            ck_assert_ptr_eq(outs[0], weight);
        result = carry ? NULL : outs[0];
    }
    expect_array(carry ? weight : result, c, "out0_%d", STEPS - 1);
    for (int j = 0; j < c->num_aux; j++)
        expect_array(state[j], c, aux_fmt[j], STEPS - 1);

    /* forgetting the states is an error, not a crash */
    if (c->num_aux) {
        mxc_ndarray *args[4] = {weight, more[0][1], more[0][2], more[0][3]}, *outs[1] = {weight};
        mxct_expect_error(
            mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, c->num_in, args, 1, outs, 1),
            MXC_EINVAL, MXCT_NEEDLES(c->op, "auxiliary"));
    }
    for (int k = 0; k < STEPS; k++)
        for (int j = 1; j < c->num_in; j++)
            mxc_nd_free(more[k][j]);
    for (int j = 0; j < c->num_aux; j++)
        mxc_nd_free(state[j]);
    mxc_nd_free(result);
    mxc_nd_free(slow);
    mxc_nd_free(weight);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}
END_TEST

/* With no output given, the update goes to a new array and the weight stays as it was. */
START_TEST(test_invoke_new_output) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[9], *vals[9];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor w = ref(c, "in0", 0);
    mxc_ndarray *args[7] = {mxct_array_of(&w)};
    for (int j = 1; j < c->num_in; j++) {
        struct mxct_tensor t = ref(c, in_fmt[j], 0);
        args[j] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
    for (int j = 0; j < c->num_aux; j++) {
        struct mxct_tensor t = ref(c, aux0_name[j], 0);
        args[c->num_in + j] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
    mxc_ndarray *outs[1] = {NULL};
    int rc = mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, c->num_in + c->num_aux, args, 1,
                                   outs, 0);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    ck_assert_ptr_nonnull(outs[0]);
    expect_array(outs[0], c, "out0_%d", 0);
    for (int j = 0; j < c->num_aux; j++)
        expect_array(args[c->num_in + j], c, aux_fmt[j], 0);
    struct mxct_tensor now = mxct_tensor_from(w.shape, NULL);
    ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(args[0], now.data,
                                             (size_t)mxc_shape_size(&w.shape) * sizeof(float)),
                     MXC_OK);
    ck_assert_int_eq(memcmp(now.data, w.data, (size_t)mxc_shape_size(&w.shape) * 4), 0);
    for (int j = 0; j < c->num_in + c->num_aux; j++)
        mxc_nd_free(args[j]);
    mxc_nd_free(outs[0]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(&now, 1);
    mxct_tensors_free(&w, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_optimizers");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_reference_steps, 0, NUM_CASES);
    tcase_add_loop_test(tc, test_requests, 0, NUM_CASES);
    tcase_add_test(tc, test_formulas);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_loop_test(tc, test_shape, 0, NUM_OPS);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke_in_place, 0, NUM_CASES);
    tcase_add_loop_test(tc, test_invoke_new_output, 0, NUM_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
