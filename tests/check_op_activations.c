/*
 * tests/check_op_activations.c — the activation, normalisation and dropout family:
 * Activation, LeakyReLU, BatchNorm and Dropout. Forward values, input gradients and (for
 * BatchNorm) hidden outputs and updated moving statistics against MXNet 1.9.1 references
 * (tests/data/ops/activations, made by scripts/gen_op_refs_activations.py);
 * finite-difference gradient checks with write and add-to requests; Dropout checked
 * statistically (drop rate, scaling, inference identity, backward through the mask,
 * reproducibility for a seed); shape inference, parameter tables and one run of each
 * operator through mxc_imperative_invoke and the engine.
 */
#include "mxc/executor.h"
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

static struct mxc__tensor view(const struct mxct_tensor *t) {
    return (struct mxc__tensor){t->data, t->shape, MXC_FLOAT32, mxc_cpu(),
                                mxc_shape_size(&t->shape)};
}

/* Runs `op`'s backward kernel directly with out_grad = og for output 0 (zeros for the
 * hidden outputs), passing only what it declared, and writes the input gradients into
 * grads (allocated here) with request `req`. */
static void backward_of(const char *op, struct mxct_params kv, bool is_train,
                        const struct mxct_tensor *in, int num_in, const struct mxct_tensor *out,
                        int num_out, const struct mxct_tensor *aux, int num_aux,
                        const struct mxct_tensor *og, struct mxct_tensor *grads) {
    const struct mxc__op_def *def = mxct_op_def(op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_int_eq(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params), MXC_OK);
    struct mxc__resource *res[2] = {NULL, NULL};
    int nres = 0;
    for (int i = 0; i < 2 && def->backward_resources[i]; i++)
        ck_assert_int_eq(mxc__resource_get(mxc_cpu(), def->backward_resources[i] - 1, &res[nres++]),
                         MXC_OK);
    struct mxc__tensor tin[4], tig[4], tout[4], tog[4], taux[2];
    struct mxct_tensor zeros[4];
    int req[4];
    for (int i = 0; i < num_in; i++) {
        grads[i] = mxct_tensor_from(in[i].shape, NULL);
        tin[i] = view(&in[i]);
        tig[i] = view(&grads[i]);
        req[i] = MXC__REQ_WRITE;
    }
    for (int i = 0; i < num_out; i++) {
        zeros[i] = mxct_tensor_from(out[i].shape, NULL);
        tout[i] = view(&out[i]);
        tog[i] = view(i == 0 ? og : &zeros[i]);
    }
    for (int i = 0; i < num_aux; i++)
        taux[i] = view(&aux[i]);
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {
        .rctx = &rctx,
        .is_train = is_train,
        .params = params,
        .in_data = (def->backward_deps & MXC__DEP_IN_DATA) ? tin : NULL,
        .num_in = num_in,
        .out_data = (def->backward_deps & MXC__DEP_OUT_DATA) ? tout : NULL,
        .num_out = num_out,
        .aux = taux,
        .num_aux = num_aux,
        .out_grad = tog,
        .in_grad = tig,
        .req = req,
        .resources = res,
        .num_resources = nres,
    };
    ck_assert_msg(def->backward_cpu(&call) == MXC_OK, "%s: %s", op, mxc_last_error());
    mxct_tensors_free(zeros, num_out);
}

/* ---- Reference cases (parameters as in scripts/gen_op_refs_activations.py) ---------- */

struct ref_case {
    const char *file; /* tests/data/ops/activations/<file>.params */
    const char *op;
    int num_in, num_out, num_aux;
    bool train;
    const char *kv[16]; /* key, value, ..., NULL */
};

/* MXNet 1.9.1's selu backward uses lambda (y + alpha) for x <= 0 instead of the derivative
 * lambda alpha e^x (y = lambda alpha (e^x - 1)), so for selu only the forward is a
 * reference; test_gradients checks our gradient against finite differences. */
static bool mxnet_grad_wrong(const struct ref_case *c) { return strcmp(c->file, "selu") == 0; }

static const struct ref_case ref_cases[] = {
    {"act_relu", "Activation", 1, 1, 0, false, {"act_type", "relu"}},
    {"act_sigmoid", "Activation", 1, 1, 0, false, {"act_type", "sigmoid"}},
    {"act_tanh", "Activation", 1, 1, 0, false, {"act_type", "tanh"}},
    {"act_softrelu", "Activation", 1, 1, 0, false, {"act_type", "softrelu"}},
    {"act_softsign", "Activation", 1, 1, 0, false, {"act_type", "softsign"}},
    {"leaky", "LeakyReLU", 1, 1, 0, false, {"act_type", "leaky", "slope", "0.1"}},
    {"leaky_default", "LeakyReLU", 1, 1, 0, false, {NULL}},
    {"prelu", "LeakyReLU", 2, 1, 0, false, {"act_type", "prelu"}},
    {"elu", "LeakyReLU", 1, 1, 0, false, {"act_type", "elu", "slope", "0.5"}},
    {"selu", "LeakyReLU", 1, 1, 0, false, {"act_type", "selu"}},
    {"gelu", "LeakyReLU", 1, 1, 0, false, {"act_type", "gelu"}},
    {"bn_train", "BatchNorm", 3, 3, 2, true, {"fix_gamma", "False"}},
    {"bn_train_fixgamma", "BatchNorm", 3, 3, 2, true, {NULL}},
    {"bn_infer", "BatchNorm", 3, 3, 2, false, {"fix_gamma", "False"}},
    {"bn_global", "BatchNorm", 3, 3, 2, true, {"fix_gamma", "False", "use_global_stats", "True"}},
    {"bn_axis_last",
     "BatchNorm",
     3,
     3,
     2,
     true,
     {"fix_gamma", "False", "axis", "-1", "eps", "0.01", "momentum", "0.8"}},
    {"bn_2d", "BatchNorm", 3, 3, 2, true, {"fix_gamma", "False"}},
};

static void expect_ref(const char *file, const char *name, const struct mxct_tensor *got,
                       const char *what_case) {
    char what[160];
    struct mxct_tensor want = mxct_ref_load(file, name);
    ck_assert_int_eq(mxc_shape_size(&got->shape), mxc_shape_size(&want.shape));
    ck_assert_int_eq(got->shape.ndim, want.shape.ndim);
    snprintf(what, sizeof what, "%s: %s vs MXNet", what_case, name);
    mxct_expect_close(got, want.data, 1e-5, 2e-5, what);
    mxct_tensors_free(&want, 1);
}

START_TEST(test_forward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[8], *vals[8];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    char file[256];
    snprintf(file, sizeof file, "ops/activations/%s.params", c->file);
    struct mxct_tensor in[3], aux[2], out[3];
    mxct_ref_load_all(file, "in", c->num_in, in);
    mxct_ref_load_all(file, "aux", c->num_aux, aux);
    int rc = mxct_op_forward(c->op, kv, c->train, in, c->num_in, c->num_aux ? aux : NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    expect_ref(file, "out0", &out[0], c->file);
    if (c->num_aux) {
        /* the hidden mean and inverse std, and the moved statistics */
        expect_ref(file, "out1", &out[1], c->file);
        expect_ref(file, "out2", &out[2], c->file);
        expect_ref(file, "auxout0", &aux[0], c->file);
        expect_ref(file, "auxout1", &aux[1], c->file);
    }
    mxct_tensors_free(out, c->num_out);
    mxct_tensors_free(aux, c->num_aux);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

START_TEST(test_backward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[8], *vals[8];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    char file[256], what[128];
    snprintf(file, sizeof file, "ops/activations/%s.params", c->file);
    struct mxct_tensor in[3], aux[2], out[3], grads[3];
    mxct_ref_load_all(file, "in", c->num_in, in);
    mxct_ref_load_all(file, "aux", c->num_aux, aux);
    struct mxct_tensor og = mxct_ref_load(file, "og0");
    ck_assert_int_eq(
        mxct_op_forward(c->op, kv, c->train, in, c->num_in, c->num_aux ? aux : NULL, out), MXC_OK);
    backward_of(c->op, kv, c->train, in, c->num_in, out, c->num_out, aux, c->num_aux, &og, grads);
    for (int i = 0; i < c->num_in && !mxnet_grad_wrong(c); i++) {
        char name[32];
        snprintf(name, sizeof name, "grad%d", i);
        snprintf(what, sizeof what, "%s backward", c->file);
        expect_ref(file, name, &grads[i], what);
    }
    mxct_tensors_free(grads, c->num_in);
    mxct_tensors_free(out, c->num_out);
    mxct_tensors_free(&og, 1);
    mxct_tensors_free(aux, c->num_aux);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in, num_aux;
    bool train;
    bool away_from_zero; /* keep input 0 clear of the kink at 0 */
    mxc_shape shapes[3];
    const char *kv[16];
};

#define BN_SHAPES                      \
    {                                  \
        {4, {4, 3, 2, 2}}, {1, {3}}, { \
            1, { 3 }                   \
        }                              \
    }
static const struct grad_case grad_cases[] = {
    {"Activation", 1, 0, true, true, {{3, {2, 3, 4}}}, {"act_type", "relu"}},
    {"Activation", 1, 0, true, false, {{3, {2, 3, 4}}}, {"act_type", "sigmoid"}},
    {"Activation", 1, 0, true, false, {{3, {2, 3, 4}}}, {"act_type", "tanh"}},
    {"Activation", 1, 0, true, false, {{3, {2, 3, 4}}}, {"act_type", "softrelu"}},
    {"Activation", 1, 0, true, true, {{3, {2, 3, 4}}}, {"act_type", "softsign"}},
    {"LeakyReLU", 1, 0, true, true, {{3, {2, 3, 4}}}, {"act_type", "leaky", "slope", "0.1"}},
    {"LeakyReLU", 2, 0, true, true, {{4, {2, 3, 2, 2}}, {1, {3}}}, {"act_type", "prelu"}},
    {"LeakyReLU", 2, 0, true, true, {{3, {2, 3, 2}}, {1, {1}}}, {"act_type", "prelu"}},
    {"LeakyReLU", 1, 0, true, true, {{3, {2, 3, 4}}}, {"act_type", "elu", "slope", "0.7"}},
    {"LeakyReLU", 1, 0, true, true, {{3, {2, 3, 4}}}, {"act_type", "selu"}},
    {"LeakyReLU", 1, 0, true, false, {{3, {2, 3, 4}}}, {"act_type", "gelu"}},
    {"BatchNorm", 3, 2, true, false, BN_SHAPES, {"fix_gamma", "False"}},
    {"BatchNorm", 3, 2, true, false, BN_SHAPES, {NULL}},
    {"BatchNorm", 3, 2, false, false, BN_SHAPES, {"fix_gamma", "False"}},
    {"BatchNorm", 3, 2, true, false, BN_SHAPES, {"fix_gamma", "False", "use_global_stats", "True"}},
    {"BatchNorm",
     3,
     2,
     true,
     false,
     {{3, {3, 2, 4}}, {1, {4}}, {1, {4}}},
     {"fix_gamma", "False", "axis", "2"}},
    /* deterministic configurations only: a draw per forward defeats finite differences */
    {"Dropout", 1, 0, true, false, {{3, {2, 3, 4}}}, {"p", "0"}},
    {"Dropout", 1, 0, false, false, {{3, {2, 3, 4}}}, {NULL}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[8], *vals[8];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in[3], aux[2];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], -1, 1, 10u + (unsigned)i);
    if (c->away_from_zero)
        for (int64_t j = 0; j < mxc_shape_size(&in[0].shape); j++)
            in[0].data[j] += in[0].data[j] < 0 ? -0.1f : 0.1f;
    for (int i = 0; i < c->num_aux; i++) {
        /* moving mean in [-0.5, 0.5), moving variance in [0.5, 1.5) */
        aux[i] = mxct_tensor_random(c->shapes[1], -0.5, 0.5, 20u + (unsigned)i);
        if (i == 1)
            for (int64_t j = 0; j < mxc_shape_size(&aux[i].shape); j++)
                aux[i].data[j] += 1.0f;
    }
    mxct_op_gradcheck(c->op, kv, c->train, in, c->num_in, c->num_aux ? aux : NULL, 0, 1e-2, 5e-2,
                      5e-3);
    mxct_tensors_free(aux, c->num_aux);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Dropout, statistically ------------------------------------------------------------ */

START_TEST(test_dropout_train) {
    struct mxct_tensor x = mxct_tensor_random(shp(2, 100, 100, 0, 0), 0.5, 1.5, 3), out[2];
    ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_NO_PARAMS, true, &x, 1, NULL, out), MXC_OK);
    int64_t n = mxc_shape_size(&x.shape), dropped = 0;
    ck_assert_int_eq(mxc_shape_size(&out[1].shape), n);
    for (int64_t i = 0; i < n; i++) {
        float m = out[1].data[i];
        ck_assert_msg(m == 0.0f || m == 2.0f, "mask[%lld] = %g", (long long)i, m);
        ck_assert_msg(out[0].data[i] == x.data[i] * m, "out[%lld] = %g, x = %g, mask = %g",
                      (long long)i, out[0].data[i], x.data[i], m);
        dropped += m == 0.0f;
    }
    /* 10000 Bernoulli(0.5) draws: the standard deviation of the rate is 0.005 */
    double rate = (double)dropped / (double)n;
    ck_assert_msg(fabs(rate - 0.5) < 0.03, "dropped %.4f of the elements, expected 0.5", rate);
    mxct_tensors_free(out, 2);

    /* p = 0.2: the rate follows p and kept values scale by 1 / 0.8 */
    ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_KV("p", "0.2"), true, &x, 1, NULL, out),
                     MXC_OK);
    dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        dropped += out[0].data[i] == 0.0f;
        if (out[0].data[i] != 0.0f)
            ck_assert_float_eq_tol(out[0].data[i], x.data[i] / 0.8f, 1e-6);
    }
    rate = (double)dropped / (double)n;
    ck_assert_msg(fabs(rate - 0.2) < 0.03, "dropped %.4f of the elements, expected 0.2", rate);
    mxct_tensors_free(out, 2);
    mxct_tensors_free(&x, 1);
}
END_TEST

START_TEST(test_dropout_inference) {
    struct mxct_tensor x = mxct_tensor_random(shp(2, 50, 40, 0, 0), -1, 1, 4), out[2];
    ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_NO_PARAMS, false, &x, 1, NULL, out), MXC_OK);
    mxct_expect_close(&out[0], x.data, 0, 0, "Dropout at inference is the identity");
    mxct_tensors_free(out, 2);
    /* mode=always drops at inference too */
    ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_KV("mode", "always"), false, &x, 1, NULL, out),
                     MXC_OK);
    int64_t dropped = 0, n = mxc_shape_size(&x.shape);
    for (int64_t i = 0; i < n; i++)
        dropped += out[0].data[i] == 0.0f;
    ck_assert_msg(fabs((double)dropped / (double)n - 0.5) < 0.05, "mode=always dropped %lld",
                  (long long)dropped);
    mxct_tensors_free(out, 2);
    mxct_tensors_free(&x, 1);
}
END_TEST

/* axes=(1,): one draw per (n, w), shared along axis 1; the mask is (N, 1, W). */
START_TEST(test_dropout_axes) {
    struct mxct_tensor x = mxct_tensor_random(shp(3, 20, 30, 25, 0), 0.5, 1.5, 5), out[2];
    ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_KV("axes", "(1,)"), true, &x, 1, NULL, out),
                     MXC_OK);
    ck_assert_int_eq(out[1].shape.ndim, 3);
    ck_assert_int_eq(out[1].shape.dims[0], 20);
    ck_assert_int_eq(out[1].shape.dims[1], 1);
    ck_assert_int_eq(out[1].shape.dims[2], 25);
    int64_t dropped = 0;
    for (int64_t n = 0; n < 20; n++)
        for (int64_t w = 0; w < 25; w++) {
            float m = out[1].data[n * 25 + w];
            dropped += m == 0.0f;
            for (int64_t c = 0; c < 30; c++) {
                int64_t i = (n * 30 + c) * 25 + w;
                ck_assert_msg(out[0].data[i] == x.data[i] * m, "out[%lld]", (long long)i);
            }
        }
    ck_assert_msg(fabs((double)dropped / 500.0 - 0.5) < 0.1, "dropped %lld of 500 draws",
                  (long long)dropped);
    mxct_tensors_free(out, 2);
    mxct_tensors_free(&x, 1);
}
END_TEST

/* backward = mask * out_grad (train), out_grad (inference), with write and add-to. */
START_TEST(test_dropout_backward) {
    struct mxct_tensor x = mxct_tensor_random(shp(2, 10, 30, 0, 0), -1, 1, 6), out[2], grads[1];
    struct mxct_tensor og = mxct_tensor_random(x.shape, -1, 1, 7);
    int64_t n = mxc_shape_size(&x.shape);
    float *want = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(want);
    for (int train = 1; train >= 0; train--) {
        ck_assert_int_eq(mxct_op_forward("Dropout", MXCT_KV("p", "0.3"), train, &x, 1, NULL, out),
                         MXC_OK);
        backward_of("Dropout", MXCT_KV("p", "0.3"), train, &x, 1, out, 2, NULL, 0, &og, grads);
        for (int64_t i = 0; i < n; i++)
            want[i] = train ? og.data[i] * out[1].data[i] : og.data[i];
        mxct_expect_close(&grads[0], want, 1e-6, 0,
                          train ? "Dropout backward (train)" : "Dropout backward (inference)");
        mxct_tensors_free(grads, 1);
        mxct_tensors_free(out, 2);
    }
    free(want);
    mxct_tensors_free(&og, 1);
    mxct_tensors_free(&x, 1);
}
END_TEST

/* Dropout through the engine, in training: mxc_random_seed makes the draws repeat. */
static struct mxct_tensor dropout_invoke(uint64_t seed, const struct mxct_tensor *x) {
    ck_assert_int_eq(mxc_random_seed(seed), MXC_OK);
    mxc_ndarray *in = mxct_array_of(x), *out[1] = {NULL};
    int rc = mxc_imperative_invoke("Dropout", 0, NULL, NULL, 1, &in, 1, out, 1);
    ck_assert_msg(rc == MXC_OK, "Dropout: %s", mxc_last_error());
    struct mxct_tensor t = mxct_tensor_of(out[0]);
    mxc_nd_free(in);
    mxc_nd_free(out[0]);
    return t;
}

START_TEST(test_dropout_seed) {
    struct mxct_tensor x = mxct_tensor_random(shp(2, 40, 50, 0, 0), 0.5, 1.5, 8);
    struct mxct_tensor a = dropout_invoke(42, &x), b = dropout_invoke(42, &x);
    struct mxct_tensor c = dropout_invoke(43, &x);
    mxct_expect_close(&b, a.data, 0, 0, "Dropout repeats for one seed");
    int64_t differ = 0, dropped = 0, n = mxc_shape_size(&x.shape);
    for (int64_t i = 0; i < n; i++) {
        differ += (a.data[i] == 0.0f) != (c.data[i] == 0.0f);
        dropped += a.data[i] == 0.0f;
    }
    ck_assert_msg(differ > n / 4, "seeds 42 and 43 give masks differing in %lld of %lld",
                  (long long)differ, (long long)n);
    ck_assert_msg(fabs((double)dropped / (double)n - 0.5) < 0.05, "dropped %lld",
                  (long long)dropped);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(&a, 1);
    mxct_tensors_free(&b, 1);
    mxct_tensors_free(&c, 1);
    mxct_tensors_free(&x, 1);
}
END_TEST

/* ---- Shape inference ------------------------------------------------------------------ */

START_TEST(test_shape_activation) {
    mxc_shape in[2] = {shp(3, 2, 3, 4, 0)}, out = {0};
    struct mxct_params relu = MXCT_KV("act_type", "relu");
    ck_assert_int_eq(mxct_op_infer_aux("Activation", relu, in, 1, &out, 1, NULL, 0), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 3, 4, 0)}, "activation output");
    /* backwards: from the output */
    in[0] = (mxc_shape){0};
    out = shp(2, 5, 6, 0, 0);
    ck_assert_int_eq(mxct_op_infer_aux("Activation", relu, in, 1, &out, 1, NULL, 0), MXC_OK);
    mxct_expect_shape(&in[0], (mxc_shape[]){shp(2, 5, 6, 0, 0)}, "activation data from output");
    in[0] = (mxc_shape){0};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer_aux("Activation", relu, in, 1, &out, 1, NULL, 0), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);
    in[0] = shp(2, 5, 6, 0, 0);
    out = shp(2, 5, 7, 0, 0);
    mxct_expect_error(mxct_op_infer_aux("Activation", relu, in, 1, &out, 1, NULL, 0), MXC_ESHAPE,
                      MXCT_NEEDLES("Activation", "data", "(5, 6)", "(5, 7)"));

    /* prelu: gamma (C,) from data's axis 1 */
    struct mxct_params prelu = MXCT_KV("act_type", "prelu");
    in[0] = shp(4, 2, 3, 5, 5);
    in[1] = (mxc_shape){0};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer_aux("LeakyReLU", prelu, in, 2, &out, 1, NULL, 0), MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(1, 3, 0, 0, 0)}, "prelu gamma");
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 3, 5, 5)}, "prelu output");
    in[1] = shp(1, 4, 0, 0, 0);
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer_aux("LeakyReLU", prelu, in, 2, &out, 1, NULL, 0), MXC_ESHAPE,
                      MXCT_NEEDLES("LeakyReLU", "gamma", "(4)", "(3)"));
    in[1] = shp(1, 1, 0, 0, 0); /* one shared slope */
    ck_assert_int_eq(mxct_op_infer_aux("LeakyReLU", prelu, in, 2, &out, 1, NULL, 0), MXC_OK);
    mxc_shape unk[2] = {{0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer_aux("LeakyReLU", prelu, unk, 2, &out, 1, NULL, 0), MXC_OK);
    ck_assert_int_eq(unk[1].ndim, 0);
    mxc_shape flat[2] = {shp(1, 5, 0, 0, 0)};
    mxct_expect_error(mxct_op_infer_aux("LeakyReLU", prelu, flat, 2, &out, 1, NULL, 0), MXC_ESHAPE,
                      MXCT_NEEDLES("LeakyReLU", "channel"));
    mxct_expect_error(
        mxct_op_infer_aux("LeakyReLU", MXCT_KV("act_type", "rrelu"), in, 1, &out, 1, NULL, 0),
        MXC_ENOTSUP, MXCT_NEEDLES("LeakyReLU", "rrelu"));
}
END_TEST

START_TEST(test_shape_batchnorm) {
    mxc_shape in[3] = {shp(4, 8, 3, 5, 5)}, out[3] = {{0}}, aux[2] = {{0}};
    ck_assert_int_eq(mxct_op_infer_aux("BatchNorm", MXCT_NO_PARAMS, in, 3, out, 3, aux, 2), MXC_OK);
    mxc_shape c3 = shp(1, 3, 0, 0, 0);
    mxct_expect_shape(&in[1], &c3, "bn gamma");
    mxct_expect_shape(&in[2], &c3, "bn beta");
    mxct_expect_shape(&out[0], (mxc_shape[]){shp(4, 8, 3, 5, 5)}, "bn output");
    mxct_expect_shape(&out[1], &c3, "bn mean");
    mxct_expect_shape(&out[2], &c3, "bn var");
    mxct_expect_shape(&aux[0], &c3, "bn moving_mean");
    mxct_expect_shape(&aux[1], &c3, "bn moving_var");

    /* axis -1 */
    mxc_shape a_in[3] = {shp(3, 2, 3, 7, 0)}, a_out[3] = {{0}}, a_aux[2] = {{0}};
    ck_assert_int_eq(
        mxct_op_infer_aux("BatchNorm", MXCT_KV("axis", "-1"), a_in, 3, a_out, 3, a_aux, 2), MXC_OK);
    mxct_expect_shape(&a_aux[1], (mxc_shape[]){shp(1, 7, 0, 0, 0)}, "bn moving_var (axis -1)");

    /* unknown data: C from a moving statistic reaches the other per-channel arguments */
    mxc_shape u_in[3] = {{0}}, u_out[3] = {{0}}, u_aux[2] = {{0}, shp(1, 6, 0, 0, 0)};
    ck_assert_int_eq(mxct_op_infer_aux("BatchNorm", MXCT_NO_PARAMS, u_in, 3, u_out, 3, u_aux, 2),
                     MXC_OK);
    mxct_expect_shape(&u_in[1], (mxc_shape[]){shp(1, 6, 0, 0, 0)}, "bn gamma from moving_var");
    mxct_expect_shape(&u_aux[0], (mxc_shape[]){shp(1, 6, 0, 0, 0)},
                      "bn moving_mean from moving_var");
    ck_assert_int_eq(u_in[0].ndim, 0);
    ck_assert_int_eq(u_out[0].ndim, 0);
    /* data from the output */
    mxc_shape o_in[3] = {{0}}, o_out[3] = {shp(2, 4, 5, 0, 0)}, o_aux[2] = {{0}};
    ck_assert_int_eq(mxct_op_infer_aux("BatchNorm", MXCT_NO_PARAMS, o_in, 3, o_out, 3, o_aux, 2),
                     MXC_OK);
    mxct_expect_shape(&o_in[0], (mxc_shape[]){shp(2, 4, 5, 0, 0)}, "bn data from output");
    mxct_expect_shape(&o_in[1], (mxc_shape[]){shp(1, 5, 0, 0, 0)}, "bn gamma from output");

    mxc_shape b_in[3] = {shp(4, 8, 3, 5, 5)}, b_out[3] = {{0}},
              b_aux[2] = {{0}, shp(1, 4, 0, 0, 0)};
    mxct_expect_error(mxct_op_infer_aux("BatchNorm", MXCT_NO_PARAMS, b_in, 3, b_out, 3, b_aux, 2),
                      MXC_ESHAPE, MXCT_NEEDLES("BatchNorm", "moving_var", "(4)", "(3)"));
    mxc_shape g_in[3] = {shp(2, 8, 3, 0, 0), shp(1, 2, 0, 0, 0)}, g_out[3] = {{0}},
              g_aux[2] = {{0}};
    mxct_expect_error(mxct_op_infer_aux("BatchNorm", MXCT_NO_PARAMS, g_in, 3, g_out, 3, g_aux, 2),
                      MXC_ESHAPE, MXCT_NEEDLES("BatchNorm", "gamma", "(2)", "(3)"));
    mxc_shape x_in[3] = {shp(2, 8, 3, 0, 0)}, x_out[3] = {{0}}, x_aux[2] = {{0}};
    mxct_expect_error(
        mxct_op_infer_aux("BatchNorm", MXCT_KV("axis", "2"), x_in, 3, x_out, 3, x_aux, 2),
        MXC_EINVAL, MXCT_NEEDLES("BatchNorm", "axis", "(8, 3)"));
}
END_TEST

START_TEST(test_shape_dropout) {
    mxc_shape in[1] = {shp(3, 4, 5, 6, 0)}, out[2] = {{0}};
    ck_assert_int_eq(mxct_op_infer_aux("Dropout", MXCT_NO_PARAMS, in, 1, out, 2, NULL, 0), MXC_OK);
    mxct_expect_shape(&out[0], (mxc_shape[]){shp(3, 4, 5, 6, 0)}, "dropout output");
    mxct_expect_shape(&out[1], (mxc_shape[]){shp(3, 4, 5, 6, 0)}, "dropout mask");
    out[0] = out[1] = (mxc_shape){0};
    ck_assert_int_eq(
        mxct_op_infer_aux("Dropout", MXCT_KV("axes", "(0, -1)"), in, 1, out, 2, NULL, 0), MXC_OK);
    mxct_expect_shape(&out[1], (mxc_shape[]){shp(3, 1, 5, 1, 0)}, "dropout mask with axes");
    mxc_shape back[1] = {{0}}, bo[2] = {shp(2, 7, 8, 0, 0)};
    ck_assert_int_eq(mxct_op_infer_aux("Dropout", MXCT_NO_PARAMS, back, 1, bo, 2, NULL, 0), MXC_OK);
    mxct_expect_shape(&back[0], (mxc_shape[]){shp(2, 7, 8, 0, 0)}, "dropout data from output");
    out[0] = out[1] = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer_aux("Dropout", MXCT_KV("axes", "(3,)"), in, 1, out, 2, NULL, 0),
                      MXC_EINVAL, MXCT_NEEDLES("Dropout", "axes", "(4, 5, 6)"));
    out[0] = shp(2, 4, 5, 0, 0);
    mxct_expect_error(mxct_op_infer_aux("Dropout", MXCT_NO_PARAMS, in, 1, out, 2, NULL, 0),
                      MXC_ESHAPE, MXCT_NEEDLES("Dropout", "(4, 5)", "(4, 5, 6)"));
}
END_TEST

/* ---- Parameters ------------------------------------------------------------------------ */

START_TEST(test_params) {
    mxct_expect_param("Activation", MXCT_KV("act_type", "softsign"), "act_type", "softsign");
    struct mxct_params none = MXCT_NO_PARAMS;
    mxct_expect_param("LeakyReLU", none, "act_type", "leaky");
    mxct_expect_param("LeakyReLU", none, "slope", "0.25");
    mxct_expect_param("LeakyReLU", none, "lower_bound", "0.125");
    mxct_expect_param("LeakyReLU", none, "upper_bound", "0.334");
    mxct_expect_param("BatchNorm", none, "eps", "0.001");
    mxct_expect_param("BatchNorm", none, "momentum", "0.9");
    mxct_expect_param("BatchNorm", none, "fix_gamma", "True");
    mxct_expect_param("BatchNorm", none, "use_global_stats", "False");
    mxct_expect_param("BatchNorm", none, "output_mean_var", "False");
    mxct_expect_param("BatchNorm", none, "axis", "1");
    mxct_expect_param("BatchNorm", none, "cudnn_off", "False");
    mxct_expect_param("Dropout", none, "p", "0.5");
    mxct_expect_param("Dropout", none, "mode", "training");
    mxct_expect_param("Dropout", none, "axes", "()");
    mxct_expect_param("Dropout", none, "cudnn_off", "False");
    mxct_expect_param("Dropout", MXCT_KV("axes", "(1, 2)"), "axes", "(1, 2)");

    mxct_expect_error(mxct_op_parse("Activation", none), MXC_EINVAL,
                      MXCT_NEEDLES("Activation", "act_type"));
    mxct_expect_error(mxct_op_parse("Activation", MXCT_KV("act_type", "swish")), MXC_EINVAL,
                      MXCT_NEEDLES("act_type", "softrelu"));
    mxct_expect_error(mxct_op_parse("LeakyReLU", MXCT_KV("act_type", "relu6")), MXC_EINVAL,
                      MXCT_NEEDLES("act_type", "prelu"));
    mxct_expect_error(mxct_op_parse("BatchNorm", MXCT_KV("momentum", "1.5")), MXC_EINVAL,
                      MXCT_NEEDLES("BatchNorm", "momentum"));
    mxct_expect_error(mxct_op_parse("BatchNorm", MXCT_KV("eps", "-1")), MXC_EINVAL,
                      MXCT_NEEDLES("eps"));
    mxct_expect_error(mxct_op_parse("BatchNorm", MXCT_KV("fix_gamma", "maybe")), MXC_EINVAL,
                      MXCT_NEEDLES("fix_gamma"));
    mxct_expect_error(mxct_op_parse("BatchNorm", MXCT_KV("moment", "0.5")), MXC_EINVAL,
                      MXCT_NEEDLES("moment", "momentum"));
    mxct_expect_error(mxct_op_parse("Dropout", MXCT_KV("p", "1.5")), MXC_EINVAL,
                      MXCT_NEEDLES("Dropout", "p"));
    mxct_expect_error(mxct_op_parse("Dropout", MXCT_KV("mode", "sometimes")), MXC_EINVAL,
                      MXCT_NEEDLES("mode", "always"));
    mxct_expect_error(mxct_op_parse("Dropout", MXCT_KV("axes", "(1, x)")), MXC_EINVAL,
                      MXCT_NEEDLES("axes"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* act_tanh, prelu, bn_train (with its moving statistics) through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    static const char *const picks[] = {"act_tanh", "prelu", "bn_train"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    const char *keys[8], *vals[8];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    char file[256];
    snprintf(file, sizeof file, "ops/activations/%s.params", c->file);
    struct mxct_tensor in[5];
    mxct_ref_load_all(file, "in", c->num_in, in);
    mxct_ref_load_all(file, "aux", c->num_aux, in + c->num_in);
    int n = c->num_in + c->num_aux;
    mxc_ndarray *arrays[5], *out[1] = {NULL};
    for (int i = 0; i < n; i++)
        arrays[i] = mxct_array_of(&in[i]);
    int rc = mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, n, arrays, 1, out, c->train);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->op, mxc_last_error());
    struct mxct_tensor got = mxct_tensor_of(out[0]);
    expect_ref(file, "out0", &got, "through mxc_imperative_invoke");
    mxct_tensors_free(&got, 1);
    for (int i = 0; i < c->num_aux; i++) {
        char name[32];
        snprintf(name, sizeof name, "auxout%d", i);
        got = mxct_tensor_of(arrays[c->num_in + i]);
        expect_ref(file, name, &got, "moving statistics through mxc_imperative_invoke");
        mxct_tensors_free(&got, 1);
    }
    for (int i = 0; i < n; i++)
        mxc_nd_free(arrays[i]);
    mxc_nd_free(out[0]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(in, n);
}
END_TEST

/* A wrong gamma through the engine is an error naming both shapes, not a crash. */
START_TEST(test_invoke_bad_shape) {
    struct mxct_tensor t[5] = {
        mxct_tensor_random(shp(2, 4, 3, 0, 0), -1, 1, 1),
        mxct_tensor_from(shp(1, 2, 0, 0, 0), NULL), mxct_tensor_from(shp(1, 3, 0, 0, 0), NULL),
        mxct_tensor_from(shp(1, 3, 0, 0, 0), NULL), mxct_tensor_from(shp(1, 3, 0, 0, 0), NULL)};
    mxc_ndarray *arrays[5], *out[1] = {NULL};
    for (int i = 0; i < 5; i++)
        arrays[i] = mxct_array_of(&t[i]);
    int rc = mxc_imperative_invoke("BatchNorm", 0, NULL, NULL, 5, arrays, 1, out, 1);
    mxct_expect_error(rc, MXC_ESHAPE, MXCT_NEEDLES("BatchNorm", "gamma", "(2)", "(3)"));
    ck_assert_ptr_null(out[0]);
    for (int i = 0; i < 5; i++)
        mxc_nd_free(arrays[i]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(t, 5);
}
END_TEST

/* A gradient nobody asked for (beta bound with MXC_GRAD_NULL) has no memory: the backward
 * kernel wrote through NULL + channel (undefined behaviour, reported by clang's UBSan;
 * found by tests/fuzz/symbol_json). The other gradients are as with every request on. */
START_TEST(test_batchnorm_null_grad_req) {
    struct mxct_tensor in[3] = {mxct_tensor_random(shp(2, 4, 3, 0, 0), -1, 1, 7),
                                mxct_tensor_random(shp(1, 3, 0, 0, 0), 0.5f, 1.5f, 8),
                                mxct_tensor_random(shp(1, 3, 0, 0, 0), -1, 1, 9)};
    struct mxct_tensor aux[2] = {mxct_tensor_from(shp(1, 3, 0, 0, 0), NULL),
                                 mxct_tensor_from(shp(1, 3, 0, 0, 0), (const float[]){1, 1, 1})};
    struct mxct_tensor head = mxct_tensor_random(shp(2, 4, 3, 0, 0), -1, 1, 10);
    struct mxct_params kv = MXCT_KV("fix_gamma", "False");
    struct mxct_tensor want[3], got[3];
    mxct_op_bound_grads("BatchNorm", kv, in, 3, aux, 2,
                        (const int[]){MXC_GRAD_WRITE, MXC_GRAD_WRITE, MXC_GRAD_WRITE}, &head, want);
    mxct_op_bound_grads("BatchNorm", kv, in, 3, aux, 2,
                        (const int[]){MXC_GRAD_WRITE, MXC_GRAD_WRITE, MXC_GRAD_NULL}, &head, got);
    mxct_expect_close(&got[0], want[0].data, 0, 0, "data gradient with beta's gradient off");
    mxct_expect_close(&got[1], want[1].data, 0, 0, "gamma gradient with beta's gradient off");
    ck_assert_ptr_null(got[2].data);
    mxct_tensors_free(want, 3);
    mxct_tensors_free(got, 3);
    mxct_tensors_free(in, 3);
    mxct_tensors_free(aux, 2);
    mxct_tensors_free(&head, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_activations");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("dropout");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_dropout_train);
    tcase_add_test(tc, test_dropout_inference);
    tcase_add_test(tc, test_dropout_axes);
    tcase_add_test(tc, test_dropout_backward);
    tcase_add_test(tc, test_dropout_seed);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_activation);
    tcase_add_test(tc, test_shape_batchnorm);
    tcase_add_test(tc, test_shape_dropout);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, 3);
    tcase_add_test(tc, test_invoke_bad_shape);
    tcase_add_test(tc, test_batchnorm_null_grad_req);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
