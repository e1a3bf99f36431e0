/*
 * tests/check_op_optimizers.c — the optimizer family: sgd_update, sgd_mom_update and
 * adam_update. Three successive steps per case against MXNet 1.9.1 (weights and states
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
    int num_aux;
    const char *kv[18]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"sgd_plain", "sgd_update", 0, {"lr", "0.1"}},
    {"sgd_wd_rescale",
     "sgd_update",
     0,
     {"lr", "0.05", "wd", "0.1", "rescale_grad", "0.5", "lazy_update", "False"}},
    {"sgd_clip",
     "sgd_update",
     0,
     {"lr", "0.1", "wd", "0.2", "rescale_grad", "2.0", "clip_gradient", "0.3"}},
    {"mom_plain", "sgd_mom_update", 1, {"lr", "0.1", "momentum", "0.9"}},
    {"mom_nomomentum", "sgd_mom_update", 1, {"lr", "0.2", "wd", "0.01"}},
    {"mom_wd_clip",
     "sgd_mom_update",
     1,
     {"lr", "0.05", "momentum", "0.8", "wd", "0.3", "rescale_grad", "1.5", "clip_gradient", "0.4"}},
    {"adam_default", "adam_update", 2, {"lr", "0.01"}},
    {"adam_wd_rescale",
     "adam_update",
     2,
     {"lr", "0.05", "beta1", "0.8", "beta2", "0.99", "epsilon", "1e-06", "wd", "0.1",
      "rescale_grad", "0.5"}},
    {"adam_clip",
     "adam_update",
     2,
     {"lr", "0.02", "wd", "0.5", "rescale_grad", "2.0", "clip_gradient", "0.2"}},
};

#define NUM_CASES ((int)MXC_ARRAY_SIZE(ref_cases))

static struct mxct_params split(const struct ref_case *c, const char **keys, const char **vals) {
    int n = 0;
    for (; c->kv[2 * n]; n++) {
        keys[n] = c->kv[2 * n];
        vals[n] = c->kv[2 * n + 1];
    }
    return (struct mxct_params){n, keys, vals};
}

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

static const char *const aux_fmt[] = {"aux0_%d", "aux1_%d"};

/* Three steps through the kernels: each step's output weight is the next step's input,
 * the states carry over in place. Weights and states are compared after every step. */
START_TEST(test_reference_steps) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[9], *vals[9];
    struct mxct_params kv = split(c, keys, vals);
    struct mxct_tensor in[2], aux[2], out[1];
    in[0] = ref(c, "in0", 0);
    for (int j = 0; j < c->num_aux; j++)
        aux[j] = ref(c, j ? "aux1" : "aux0", 0);
    for (int k = 0; k < STEPS; k++) {
        in[1] = ref(c, "in1_%d", k);
        int rc = mxct_op_forward(c->op, kv, true, in, 2, c->num_aux ? aux : NULL, out);
        ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
        expect_step(&out[0], c, "out0_%d", k);
        for (int j = 0; j < c->num_aux; j++)
            expect_step(&aux[j], c, aux_fmt[j], k);
        mxct_tensors_free(&in[1], 1);
        mxct_tensors_free(&in[0], 1);
        in[0] = out[0]; /* the next step starts from this step's weight */
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
    struct mxct_params kv = split(c, keys, vals);
    const struct mxc__op_def *def = mxc__op_find(c->op);
    ck_assert_ptr_nonnull(def);
    _Alignas(16) unsigned char params[1024];
    ck_assert_int_eq(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params), MXC_OK);
    struct mxct_tensor g = ref(c, "in1_%d", 0);
    struct mxc__tensor tin[2] = {view(w), view(&g)}, taux[2], tout[1];
    tout[0] = req == MXC__REQ_INPLACE ? tin[0] : view(out);
    for (int j = 0; j < c->num_aux; j++)
        taux[j] = view(&aux[j]);
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {.rctx = &rctx,
                                .is_train = true,
                                .params = params,
                                .in_data = tin,
                                .num_in = 2,
                                .out_data = tout,
                                .num_out = 1,
                                .aux = taux,
                                .num_aux = c->num_aux,
                                .req = &req};
    ck_assert_int_eq(def->forward_cpu(&call), MXC_OK);
    mxct_tensors_free(&g, 1);
}

START_TEST(test_requests) {
    const struct ref_case *c = &ref_cases[_i];
    struct mxct_tensor w = ref(c, "in0", 0), aux[2];
    struct mxct_tensor want = ref(c, "out0_%d", 0);
    struct mxct_tensor out = mxct_tensor_from(w.shape, NULL);
    const int64_t n = mxc_shape_size(&w.shape);
    char what[128];

    /* add-to: out = 1 + new weight; the states still take exactly one step */
    for (int j = 0; j < c->num_aux; j++)
        aux[j] = ref(c, j ? "aux1" : "aux0", 0);
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
    for (int j = 0; j < c->num_aux; j++)
        aux[j] = ref(c, j ? "aux1" : "aux0", 0);
    for (int64_t i = 0; i < n; i++)
        out.data[i] = 7.0f;
    run_step0(c, MXC__REQ_NULL, &w, aux, &out);
    for (int64_t i = 0; i < n; i++)
        ck_assert_float_eq(out.data[i], 7.0f);
    for (int j = 0; j < c->num_aux; j++)
        expect_step(&aux[j], c, aux_fmt[j], 0);
    mxct_tensors_free(aux, c->num_aux);

    /* in place: the output is the weight buffer itself */
    for (int j = 0; j < c->num_aux; j++)
        aux[j] = ref(c, j ? "aux1" : "aux0", 0);
    run_step0(c, MXC__REQ_INPLACE, &w, aux, NULL);
    snprintf(what, sizeof what, "%s in-place request", c->file);
    mxct_expect_close(&w, want.data, RTOL, ATOL, what);
    for (int j = 0; j < c->num_aux; j++)
        expect_step(&aux[j], c, aux_fmt[j], 0);
    mxct_tensors_free(aux, c->num_aux);

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

static const struct mxc__op_def *def_of(const char *name) {
    const struct mxc__op_def *d = mxc__op_find(name);
    ck_assert_msg(d != NULL, "%s is not registered", name);
    return d;
}

static int infer(const char *op, struct mxct_params kv, mxc_shape *in, mxc_shape *aux,
                 mxc_shape *out) {
    const struct mxc__op_def *d = def_of(op);
    _Alignas(16) unsigned char params[1024];
    int rc = mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params);
    if (rc != MXC_OK)
        return rc;
    ck_assert_int_eq(mxc__op_num_inputs(d, params, NULL), 2);
    return d->infer_shape(params, in, 2, out, 1, aux, mxc__op_num_aux(d));
}

static bool same(const mxc_shape *a, mxc_shape b) {
    bool eq = a->ndim == b.ndim;
    for (int i = 0; eq && i < b.ndim; i++)
        eq = a->dims[i] == b.dims[i];
    return eq;
}

static void expect_error(int rc, int code, const char *const *needles) {
    ck_assert_msg(rc == code, "expected %s, got %s (%s)", mxc_err_name(code), mxc_err_name(rc),
                  mxc_last_error());
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(mxc_last_error(), needles[i]), "message '%s' lacks '%s'",
                      mxc_last_error(), needles[i]);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const ops[] = {"sgd_update", "sgd_mom_update", "adam_update"};

START_TEST(test_shape) {
    const char *op = ops[_i];
    const mxc_shape s = shp(2, 3, 5, 0);
    struct mxct_params lr = MXCT_KV("lr", "0.1");
    int naux = mxc__op_num_aux(def_of(op));
    ck_assert_int_eq(naux, _i);

    /* from the weight to everything else */
    mxc_shape in[2] = {s}, aux[2] = {{0}}, out = {0};
    ck_assert_int_eq(infer(op, lr, in, aux, &out), MXC_OK);
    ck_assert(same(&in[1], s) && same(&out, s));
    for (int j = 0; j < naux; j++)
        ck_assert(same(&aux[j], s));

    /* backwards: from the output (or a state) to the weight and gradient */
    mxc_shape in2[2] = {{0}}, aux2[2] = {{0}}, out2 = s;
    ck_assert_int_eq(infer(op, lr, in2, aux2, &out2), MXC_OK);
    ck_assert(same(&in2[0], s) && same(&in2[1], s));
    for (int j = 0; j < naux; j++)
        ck_assert(same(&aux2[j], s));
    if (naux) {
        mxc_shape in3[2] = {{0}}, aux3[2] = {{0}, {0}}, out3 = {0};
        aux3[naux - 1] = s;
        ck_assert_int_eq(infer(op, lr, in3, aux3, &out3), MXC_OK);
        ck_assert(same(&in3[0], s) && same(&out3, s));
    }

    /* nothing known: no error, nothing deduced */
    mxc_shape in4[2] = {{0}}, aux4[2] = {{0}}, out4 = {0};
    ck_assert_int_eq(infer(op, lr, in4, aux4, &out4), MXC_OK);
    ck_assert_int_eq(in4[0].ndim + in4[1].ndim + out4.ndim + aux4[0].ndim, 0);

    /* conflicts name the operator, the argument and both shapes */
    mxc_shape bad[2] = {s, shp(2, 3, 4, 0)}, a5[2] = {{0}}, o5 = {0};
    expect_error(infer(op, lr, bad, a5, &o5), MXC_ESHAPE, NEEDLES(op, "grad", "(3, 4)", "(3, 5)"));
    mxc_shape in6[2] = {s}, a6[2] = {{0}}, o6 = shp(1, 15, 0, 0);
    expect_error(infer(op, lr, in6, a6, &o6), MXC_ESHAPE, NEEDLES(op, "output", "(15)"));
    if (naux) {
        mxc_shape in7[2] = {s}, a7[2] = {s, s}, o7 = {0};
        a7[naux - 1] = shp(3, 3, 5, 1);
        expect_error(infer(op, lr, in7, a7, &o7), MXC_ESHAPE,
                     NEEDLES(op, naux == 1 ? "mom" : "var", "(3, 5, 1)", "(3, 5)"));
    }
}
END_TEST

/* ---- Parameters ---------------------------------------------------------------------- */

static void expect_param(const char *op, struct mxct_params kv, const char *key, const char *want) {
    const struct mxc__op_def *d = def_of(op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_msg(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params) == MXC_OK, "%s",
                  mxc_last_error());
    for (int i = 0; i < d->num_params; i++)
        if (strcmp(d->params[i].name, key) == 0) {
            char buf[64];
            mxc__op_format_param(&d->params[i], params, buf, sizeof buf);
            ck_assert_msg(strcmp(buf, want) == 0, "%s.%s = %s, expected %s", op, key, buf, want);
            return;
        }
    ck_abort_msg("%s has no parameter %s", op, key);
}

START_TEST(test_params) {
    struct mxct_params lr = MXCT_KV("lr", "0.01");
    for (int i = 0; i < 3; i++) {
        expect_param(ops[i], lr, "lr", "0.01");
        expect_param(ops[i], lr, "wd", "0");
        expect_param(ops[i], lr, "rescale_grad", "1");
        expect_param(ops[i], lr, "clip_gradient", "-1");
        expect_param(ops[i], lr, "lazy_update", "True");
        expect_param(ops[i], MXCT_KV("lr", "1", "lazy_update", "False"), "lazy_update", "False");
    }
    expect_param("sgd_mom_update", lr, "momentum", "0");
    expect_param("adam_update", lr, "beta1", "0.9");
    expect_param("adam_update", lr, "beta2", "0.999");
    expect_param("adam_update", lr, "epsilon", "1e-08");

    mxc_shape in[2] = {{0}}, aux[2] = {{0}}, out = {0};
    for (int i = 0; i < 3; i++)
        expect_error(infer(ops[i], MXCT_KV("wd", "0.1"), in, aux, &out), MXC_EINVAL,
                     NEEDLES(ops[i], "lr"));
    expect_error(infer("sgd_update", MXCT_KV("lr", "0.1", "momentum", "0.9"), in, aux, &out),
                 MXC_EINVAL, NEEDLES("momentum", "clip_gradient", "lazy_update"));
    expect_error(infer("sgd_mom_update", MXCT_KV("lr", "0.1", "momentum", "1.5"), in, aux, &out),
                 MXC_EINVAL, NEEDLES("momentum"));
    expect_error(infer("adam_update", MXCT_KV("lr", "0.1", "beta1", "-0.1"), in, aux, &out),
                 MXC_EINVAL, NEEDLES("beta1"));
    expect_error(infer("adam_update", MXCT_KV("lr", "0.1", "beta2", "2"), in, aux, &out),
                 MXC_EINVAL, NEEDLES("beta2"));
    expect_error(infer("adam_update", MXCT_KV("lr", "0.1", "epsilon", "-1e-8"), in, aux, &out),
                 MXC_EINVAL, NEEDLES("epsilon"));
    expect_error(infer("adam_update", MXCT_KV("lr", "fast"), in, aux, &out), MXC_EINVAL,
                 NEEDLES("lr"));

    mxc_op_info info;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(mxc_op_get_info(ops[i], &info), MXC_OK);
        ck_assert_int_eq(info.differentiable, 0);
        ck_assert_int_eq(info.num_inputs, 2);
        ck_assert_int_eq(info.num_aux, i);
        ck_assert_int_eq(info.num_outputs, 1);
    }
}
END_TEST

/* ---- Through the engine -------------------------------------------------------------- */

static void expect_array(const mxc_ndarray *a, const struct ref_case *c, const char *fmt, int k) {
    struct mxct_tensor want = ref(c, fmt, k);
    mxc_shape s;
    ck_assert_int_eq(mxc_nd_get_shape(a, &s), MXC_OK);
    ck_assert(same(&s, want.shape));
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
    struct mxct_params kv = split(c, keys, vals);
    struct mxct_tensor w = ref(c, "in0", 0);
    mxc_ndarray *weight = mxct_array_of(&w), *state[2] = {NULL, NULL}, *grad[STEPS];
    mxct_tensors_free(&w, 1);
    for (int j = 0; j < c->num_aux; j++) {
        struct mxct_tensor t = ref(c, j ? "aux1" : "aux0", 0);
        state[j] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
    for (int k = 0; k < STEPS; k++) {
        struct mxct_tensor g = ref(c, "in1_%d", k);
        grad[k] = mxct_array_of(&g);
        mxct_tensors_free(&g, 1);
    }
    mxc_ndarray *slow = NULL;
    const char *sk[] = {"seconds"}, *sv[] = {"0.05"};
    ck_assert_int_eq(mxc_imperative_invoke("_sleep", 1, sk, sv, 1, &grad[0], 1, &slow, 0), MXC_OK);
    for (int k = 0; k < STEPS; k++) {
        mxc_ndarray *args[4] = {weight, k ? grad[k] : slow, state[0], state[1]};
        mxc_ndarray *outs[1] = {weight};
        int rc = mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, 2 + c->num_aux, args, 1,
                                       outs, 1);
        ck_assert_msg(rc == MXC_OK, "%s step %d: %s", c->file, k, mxc_last_error());
        ck_assert_ptr_eq(outs[0], weight);
    }
    expect_array(weight, c, "out0_%d", STEPS - 1);
    for (int j = 0; j < c->num_aux; j++)
        expect_array(state[j], c, aux_fmt[j], STEPS - 1);

    /* forgetting the states is an error, not a crash */
    if (c->num_aux) {
        mxc_ndarray *args[2] = {weight, grad[0]}, *outs[1] = {weight};
        expect_error(mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, 2, args, 1, outs, 1),
                     MXC_EINVAL, NEEDLES(c->op, "auxiliary"));
    }
    for (int k = 0; k < STEPS; k++)
        mxc_nd_free(grad[k]);
    for (int j = 0; j < c->num_aux; j++)
        mxc_nd_free(state[j]);
    mxc_nd_free(slow);
    mxc_nd_free(weight);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}
END_TEST

/* With no output given, the update goes to a new array and the weight stays as it was. */
START_TEST(test_invoke_new_output) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[9], *vals[9];
    struct mxct_params kv = split(c, keys, vals);
    struct mxct_tensor w = ref(c, "in0", 0), g = ref(c, "in1_%d", 0);
    mxc_ndarray *args[4] = {mxct_array_of(&w), mxct_array_of(&g), NULL, NULL};
    for (int j = 0; j < c->num_aux; j++) {
        struct mxct_tensor t = ref(c, j ? "aux1" : "aux0", 0);
        args[2 + j] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
    mxc_ndarray *outs[1] = {NULL};
    int rc =
        mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, 2 + c->num_aux, args, 1, outs, 0);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    ck_assert_ptr_nonnull(outs[0]);
    expect_array(outs[0], c, "out0_%d", 0);
    for (int j = 0; j < c->num_aux; j++)
        expect_array(args[2 + j], c, aux_fmt[j], 0);
    struct mxct_tensor now = mxct_tensor_from(w.shape, NULL);
    ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(args[0], now.data,
                                             (size_t)mxc_shape_size(&w.shape) * sizeof(float)),
                     MXC_OK);
    ck_assert_int_eq(memcmp(now.data, w.data, (size_t)mxc_shape_size(&w.shape) * 4), 0);
    for (int j = 0; j < 2 + c->num_aux; j++)
        mxc_nd_free(args[j]);
    mxc_nd_free(outs[0]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(&now, 1);
    mxct_tensors_free(&g, 1);
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
    tcase_add_loop_test(tc, test_shape, 0, 3);
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
