/*
 * tests/check_op_losses.c — the softmax and loss-output family: softmax, log_softmax,
 * SoftmaxOutput, LinearRegressionOutput, LogisticRegressionOutput, MAERegressionOutput.
 * Forward values and input gradients against MXNet 1.9.1 references
 * (tests/data/ops/losses, made by scripts/gen_op_refs_losses.py; the loss gradients come
 * from MXNet's executor backward() without head gradients), finite-difference gradient
 * checks for softmax / log_softmax, write and add-to requests for the losses, shape
 * inference (deduction, conflicts), parameter tables (defaults, bounds, enums, unknown
 * keys) and one run of each operator through mxc_imperative_invoke and the engine.
 */
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mxc_shape shp(int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d};
    return mxc_shape_make(ndim, dims);
}

/* ---- Reference cases (parameters as in scripts/gen_op_refs_losses.py) --------------- */

struct ref_case {
    const char *file; /* tests/data/ops/losses/<file>.params */
    const char *op;
    int num_in;         /* 1: softmax-like (og0 given), 2: a loss (data, label) */
    const char *kv[16]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"sm_last", "softmax", 1, {NULL}},
    {"sm_axis1", "softmax", 1, {"axis", "1"}},
    {"sm_temp", "softmax", 1, {"temperature", "2.5"}},
    {"sm_large", "softmax", 1, {NULL}},
    {"lsm_last", "log_softmax", 1, {NULL}},
    {"lsm_axis0_temp", "log_softmax", 1, {"axis", "0", "temperature", "0.5"}},
    {"lsm_large", "log_softmax", 1, {"axis", "-2"}},
    {"so_basic", "SoftmaxOutput", 2, {NULL}},
    {"so_scale_batch", "SoftmaxOutput", 2, {"grad_scale", "2", "normalization", "batch"}},
    {"so_ignore_valid",
     "SoftmaxOutput",
     2,
     {"use_ignore", "True", "ignore_label", "1", "normalization", "valid"}},
    {"so_multi", "SoftmaxOutput", 2, {"multi_output", "True"}},
    {"so_multi_valid",
     "SoftmaxOutput",
     2,
     {"multi_output", "True", "use_ignore", "True", "ignore_label", "0", "normalization", "valid"}},
    {"so_multi_batch", "SoftmaxOutput", 2, {"multi_output", "True", "normalization", "batch"}},
    {"so_preserve", "SoftmaxOutput", 2, {"preserve_shape", "True", "normalization", "batch"}},
    {"so_smooth", "SoftmaxOutput", 2, {"smooth_alpha", "0.1"}},
    {"so_prob", "SoftmaxOutput", 2, {"grad_scale", "0.5"}},
    {"so_flatten", "SoftmaxOutput", 2, {"normalization", "batch"}},
    {"lin_basic", "LinearRegressionOutput", 2, {NULL}},
    {"lin_col", "LinearRegressionOutput", 2, {"grad_scale", "3"}},
    {"logi_basic", "LogisticRegressionOutput", 2, {"grad_scale", "0.5"}},
    {"mae_basic", "MAERegressionOutput", 2, {"grad_scale", "2"}},
    {"mae_3d", "MAERegressionOutput", 2, {NULL}},
};

/* The case's file name into file (256 bytes) and its inputs into in. */
static void load_inputs(const struct ref_case *c, char *file, struct mxct_tensor *in) {
    snprintf(file, 256, "ops/losses/%s.params", c->file);
    mxct_ref_load_all(file, "in", c->num_in, in);
}

/* The case as the reference helpers take it; a loss's label gets no gradient. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    struct mxct_ref_case r = mxct_ref_case_of("losses", c->file, c->op, c->kv, c->num_in, 1);
    r.grad_zero = c->num_in == 2 ? 2u : 0u;
    return r;
}

START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, false, 1e-5, 1e-6);
}
END_TEST

/* softmax-like cases: backward for the head gradient og0; losses: backward without head
 * gradients (they ignore them), the label's gradient zero. */
START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-5, 1e-6);
}
END_TEST

/* Losses with add-to requests: gradients preset to 1 receive 1 + MXNet's gradient (the
 * label's stays 1); a null request leaves the data gradient alone. */
START_TEST(test_loss_add_to) {
    const struct ref_case *c = &ref_cases[_i];
    if (c->num_in != 2)
        return;
    const char *keys[8], *vals[8];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    char file[256], what[128];
    struct mxct_tensor in[2], out[1], grads[2];
    load_inputs(c, file, in);
    ck_assert_int_eq(mxct_op_forward(c->op, kv, true, in, 2, NULL, out), MXC_OK);
    const struct mxc__op_def *def = mxc__op_find(c->op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_int_eq(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params), MXC_OK);
    ck_assert(!(def->backward_deps & MXC__DEP_OUT_GRAD));
    struct mxc__tensor tin[2], tig[2], tout;
    for (int i = 0; i < 2; i++) {
        grads[i] = mxct_tensor_from(in[i].shape, NULL);
        for (int64_t j = 0; j < mxc_shape_size(&in[i].shape); j++)
            grads[i].data[j] = 1.0f;
        tin[i] = (struct mxc__tensor){in[i].data, in[i].shape, MXC_FLOAT32, mxc_cpu(),
                                      mxc_shape_size(&in[i].shape)};
        tig[i] = (struct mxc__tensor){grads[i].data, in[i].shape, MXC_FLOAT32, mxc_cpu(),
                                      mxc_shape_size(&in[i].shape)};
    }
    tout = (struct mxc__tensor){out[0].data, out[0].shape, MXC_FLOAT32, mxc_cpu(),
                                mxc_shape_size(&out[0].shape)};
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    int req[2] = {MXC__REQ_ADD, MXC__REQ_ADD};
    struct mxc__op_call call = {.rctx = &rctx,
                                .is_train = true,
                                .params = params,
                                .in_data = tin,
                                .num_in = 2,
                                .out_data = &tout,
                                .num_out = 1,
                                .in_grad = tig,
                                .req = req};
    ck_assert_msg(def->backward_cpu(&call) == MXC_OK, "%s", mxc_last_error());
    struct mxct_tensor want = mxct_ref_load(file, "grad0");
    for (int64_t j = 0; j < mxc_shape_size(&want.shape); j++)
        want.data[j] += 1.0f;
    snprintf(what, sizeof what, "%s add-to data gradient", c->file);
    mxct_expect_close(&grads[0], want.data, 1e-5, 1e-6, what);
    for (int64_t j = 0; j < mxc_shape_size(&in[1].shape); j++)
        ck_assert_msg(grads[1].data[j] == 1.0f, "%s: add-to changed the label gradient", c->file);
    /* null requests: nothing written */
    struct mxct_tensor before = mxct_tensor_from(in[0].shape, grads[0].data);
    req[0] = req[1] = MXC__REQ_NULL;
    ck_assert_int_eq(def->backward_cpu(&call), MXC_OK);
    snprintf(what, sizeof what, "%s null request", c->file);
    mxct_expect_close(&grads[0], before.data, 0, 0, what);
    mxct_tensors_free(&before, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(grads, 2);
    mxct_tensors_free(out, 1);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Finite-difference gradients (softmax, log_softmax) ------------------------------ */

struct grad_case {
    const char *op;
    mxc_shape shape;
    const char *kv[8];
};

static const struct grad_case grad_cases[] = {
    {"softmax", {2, {3, 5}}, {NULL}},
    {"softmax", {3, {2, 4, 3}}, {"axis", "1"}},
    {"softmax", {3, {3, 2, 2}}, {"axis", "0", "temperature", "3"}},
    {"log_softmax", {2, {3, 5}}, {NULL}},
    {"log_softmax", {3, {2, 3, 4}}, {"axis", "-2", "temperature", "0.7"}},
    {"log_softmax", {1, {6}}, {"axis", "0"}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[4], *vals[4];
    int n = 0;
    for (; c->kv[2 * n]; n++) {
        keys[n] = c->kv[2 * n];
        vals[n] = c->kv[2 * n + 1];
    }
    struct mxct_params kv = {n, keys, vals};
    struct mxct_tensor in = mxct_tensor_random(c->shape, -2, 2, 5u + (unsigned)_i);
    mxct_op_gradcheck(c->op, kv, true, &in, 1, NULL, 0, 1e-3, 1e-2, 1e-3);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* Large inputs stay finite: the maximum is subtracted first. */
START_TEST(test_stability) {
    float v[4] = {1000.0f, 1001.0f, -1000.0f, 999.0f};
    struct mxct_tensor in = mxct_tensor_from(shp(2, 1, 4, 0, 0), v), out[1];
    ck_assert_int_eq(mxct_op_forward("softmax", MXCT_NO_PARAMS, false, &in, 1, NULL, out), MXC_OK);
    double e1 = exp(-1.0), e2 = exp(-2.0), s = 1 + e1 + e2;
    float want[4] = {(float)(e1 / s), (float)(1 / s), 0.0f, (float)(e2 / s)};
    mxct_expect_close(&out[0], want, 1e-6, 1e-7, "softmax of large values");
    mxct_tensors_free(out, 1);
    ck_assert_int_eq(mxct_op_forward("log_softmax", MXCT_NO_PARAMS, false, &in, 1, NULL, out),
                     MXC_OK);
    float lwant[4] = {(float)(-1 - log(s)), (float)(-log(s)), (float)(-2001 - log(s)),
                      (float)(-2 - log(s))};
    mxct_expect_close(&out[0], lwant, 1e-6, 1e-5, "log_softmax of large values");
    mxct_tensors_free(out, 1);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* ---- Shape inference ------------------------------------------------------------------ */

START_TEST(test_shape_softmax) {
    static const char *const ops[] = {"softmax", "log_softmax"};
    for (int k = 0; k < 2; k++) {
        mxc_shape in[1] = {shp(3, 2, 3, 4, 0)}, out = {0};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_KV("axis", "-3"), in, 1, &out, 1), MXC_OK);
        mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 3, 4, 0)}, ops[k]);
        /* the output gives the data */
        mxc_shape back[1] = {{0}};
        out = shp(2, 5, 6, 0, 0);
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, back, 1, &out, 1), MXC_OK);
        mxct_expect_shape(&back[0], (mxc_shape[]){shp(2, 5, 6, 0, 0)}, "data from output");
        /* unknown: nothing to deduce, no error */
        mxc_shape unk[1] = {{0}};
        out = (mxc_shape){0};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_KV("axis", "5"), unk, 1, &out, 1), MXC_OK);
        ck_assert_int_eq(out.ndim, 0);
        out = shp(2, 5, 7, 0, 0);
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_NO_PARAMS, in, 1, &out, 1), MXC_ESHAPE,
                          MXCT_NEEDLES(ops[k], "(5, 7)", "(2, 3, 4)"));
        out = (mxc_shape){0};
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_KV("axis", "3"), in, 1, &out, 1), MXC_EINVAL,
                          MXCT_NEEDLES(ops[k], "axis 3", "(2, 3, 4)"));
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_KV("axis", "-4"), in, 1, &out, 1), MXC_EINVAL,
                          MXCT_NEEDLES("axis -4"));
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_KV("temperature", "0"), in, 1, &out, 1),
                          MXC_EINVAL, MXCT_NEEDLES(ops[k], "temperature"));
    }
}
END_TEST

START_TEST(test_shape_softmax_output) {
    const char *op = "SoftmaxOutput";
    mxc_shape in[2] = {shp(2, 8, 10, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_NO_PARAMS, in, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(1, 8, 0, 0, 0)}, "label");
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 8, 10, 0, 0)}, "output");

    mxc_shape m[2] = {shp(4, 2, 3, 4, 5)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_KV("multi_output", "True"), m, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&m[1], (mxc_shape[]){shp(2, 2, 20, 0, 0)}, "multi_output label");
    /* the other label layouts multi_output accepts */
    mxc_shape m2[2] = {shp(4, 2, 3, 4, 5), shp(3, 2, 4, 5, 0)};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_KV("multi_output", "True"), m2, 2, &out, 1), MXC_OK);
    mxc_shape m3[2] = {shp(4, 2, 3, 4, 5), shp(4, 2, 1, 4, 5)};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_KV("multi_output", "True"), m3, 2, &out, 1), MXC_OK);
    mxc_shape mb[2] = {shp(4, 2, 3, 4, 5), shp(2, 2, 4, 0, 0)};
    mxct_expect_error(mxct_op_infer(op, MXCT_KV("multi_output", "True"), mb, 2, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES(op, "label", "(2, 4)", "(2, 20)", "(2, 4, 5)"));

    mxc_shape pr[2] = {shp(3, 2, 3, 4, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_KV("preserve_shape", "True"), pr, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&pr[1], (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "preserve_shape label");

    /* probability labels of data's shape */
    mxc_shape pb[2] = {shp(2, 8, 10, 0, 0), shp(2, 8, 10, 0, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_NO_PARAMS, pb, 2, &out, 1), MXC_OK);

    /* data from the output; unknown data leaves the label unknown */
    mxc_shape back[2] = {{0}};
    out = shp(2, 4, 3, 0, 0);
    ck_assert_int_eq(mxct_op_infer(op, MXCT_NO_PARAMS, back, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&back[0], (mxc_shape[]){shp(2, 4, 3, 0, 0)}, "data from output");
    mxct_expect_shape(&back[1], (mxc_shape[]){shp(1, 4, 0, 0, 0)}, "label from output");
    mxc_shape unk[2] = {{0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer(op, MXCT_NO_PARAMS, unk, 2, &out, 1), MXC_OK);
    ck_assert_int_eq(unk[1].ndim, 0);
    ck_assert_int_eq(out.ndim, 0);

    mxc_shape bad[2] = {shp(2, 8, 10, 0, 0), shp(1, 7, 0, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer(op, MXCT_NO_PARAMS, bad, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES(op, "label", "(7)", "(8)"));
    mxc_shape one[2] = {shp(1, 8, 0, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer(op, MXCT_NO_PARAMS, one, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES(op, "2 dimensions", "(8)"));
    mxc_shape any[2] = {{0}};
    mxct_expect_error(mxct_op_infer(op, MXCT_KV("out_grad", "True"), any, 2, &out, 1), MXC_ENOTSUP,
                      MXCT_NEEDLES(op, "out_grad"));
}
END_TEST

START_TEST(test_shape_regression) {
    static const char *const ops[] = {"LinearRegressionOutput", "LogisticRegressionOutput",
                                      "MAERegressionOutput"};
    for (int k = 0; k < 3; k++) {
        mxc_shape in[2] = {shp(2, 5, 1, 0, 0)}, out = {0};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, in, 2, &out, 1), MXC_OK);
        mxct_expect_shape(&in[1], (mxc_shape[]){shp(1, 5, 0, 0, 0)}, "label of (5, 1)");
        mxct_expect_shape(&out, (mxc_shape[]){shp(2, 5, 1, 0, 0)}, "output");
        mxc_shape m[2] = {shp(3, 4, 2, 3, 0)};
        out = (mxc_shape){0};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, m, 2, &out, 1), MXC_OK);
        mxct_expect_shape(&m[1], (mxc_shape[]){shp(3, 4, 2, 3, 0)}, "label of (4, 2, 3)");
        mxc_shape flat[2] = {shp(3, 4, 2, 3, 0), shp(2, 4, 6, 0, 0)};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, flat, 2, &out, 1), MXC_OK);
        mxc_shape back[2] = {{0}};
        out = shp(2, 4, 3, 0, 0);
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, back, 2, &out, 1), MXC_OK);
        mxct_expect_shape(&back[0], (mxc_shape[]){shp(2, 4, 3, 0, 0)}, "data from output");
        mxc_shape unk[2] = {{0}};
        out = (mxc_shape){0};
        ck_assert_int_eq(mxct_op_infer(ops[k], MXCT_NO_PARAMS, unk, 2, &out, 1), MXC_OK);
        ck_assert_int_eq(unk[1].ndim, 0);
        mxc_shape bad[2] = {shp(2, 4, 3, 0, 0), shp(2, 3, 4, 0, 0)};
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_NO_PARAMS, bad, 2, &out, 1), MXC_ESHAPE,
                          MXCT_NEEDLES(ops[k], "label", "(3, 4)", "(4, 3)"));
        mxc_shape bad_out[2] = {shp(2, 4, 3, 0, 0)};
        out = shp(2, 4, 4, 0, 0);
        mxct_expect_error(mxct_op_infer(ops[k], MXCT_NO_PARAMS, bad_out, 2, &out, 1), MXC_ESHAPE,
                          MXCT_NEEDLES(ops[k], "(4, 4)", "(4, 3)"));
    }
}
END_TEST

/* ---- Parameters ------------------------------------------------------------------------ */

START_TEST(test_params) {
    struct mxct_params none = MXCT_NO_PARAMS;
    mxct_expect_param("softmax", none, "axis", "-1");
    mxct_expect_param("softmax", none, "temperature", "None");
    mxct_expect_param("log_softmax", MXCT_KV("temperature", "2"), "temperature", "2");
    const char *so = "SoftmaxOutput";
    mxct_expect_param(so, none, "grad_scale", "1");
    mxct_expect_param(so, none, "ignore_label", "-1");
    mxct_expect_param(so, none, "multi_output", "False");
    mxct_expect_param(so, none, "use_ignore", "False");
    mxct_expect_param(so, none, "preserve_shape", "False");
    mxct_expect_param(so, none, "normalization", "null");
    mxct_expect_param(so, none, "out_grad", "False");
    mxct_expect_param(so, none, "smooth_alpha", "0");
    mxct_expect_param(so, MXCT_KV("normalization", "valid"), "normalization", "valid");
    mxct_expect_param("LinearRegressionOutput", none, "grad_scale", "1");
    mxct_expect_param("LogisticRegressionOutput", none, "grad_scale", "1");
    mxct_expect_param("MAERegressionOutput", MXCT_KV("grad_scale", "0.5"), "grad_scale", "0.5");

    mxc_shape in[2] = {{0}}, out = {0};
    mxct_expect_error(mxct_op_infer(so, MXCT_KV("normalization", "all"), in, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("normalization", "batch", "valid"));
    mxct_expect_error(mxct_op_infer(so, MXCT_KV("smooth_alpha", "1.5"), in, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("smooth_alpha"));
    mxct_expect_error(mxct_op_infer(so, MXCT_KV("use_ignore", "maybe"), in, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("use_ignore"));
    mxct_expect_error(mxct_op_infer(so, MXCT_KV("ignore", "1"), in, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("ignore", "ignore_label"));
    mxct_expect_error(mxct_op_infer("softmax", MXCT_KV("axis", "x"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("axis"));
    mxct_expect_error(mxct_op_infer("softmax", MXCT_KV("dim", "1"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("dim", "temperature"));
    mxct_expect_error(
        mxct_op_infer("LinearRegressionOutput", MXCT_KV("scale", "1"), in, 2, &out, 1), MXC_EINVAL,
        MXCT_NEEDLES("scale", "grad_scale"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* One case per operator through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    static const char *const picks[] = {"sm_axis1", "lsm_last",   "so_multi",
                                        "lin_col",  "logi_basic", "mae_basic"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, false, 1e-5, 1e-6);
    /* a label of the wrong shape is an error naming it, not a crash */
    if (c->num_in == 2)
        mxct_ref_expect_invoke_error(&r, 1, shp(2, 1, 7, 0, 0), MXC_ESHAPE,
                                     MXCT_NEEDLES("label", "(1, 7)"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_losses");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    int n = (int)MXC_ARRAY_SIZE(ref_cases);
    tcase_add_loop_test(tc, test_forward_reference, 0, n);
    tcase_add_loop_test(tc, test_backward_reference, 0, n);
    tcase_add_loop_test(tc, test_loss_add_to, 0, n);
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    tcase_add_test(tc, test_stability);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_softmax);
    tcase_add_test(tc, test_shape_softmax_output);
    tcase_add_test(tc, test_shape_regression);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, 6);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
