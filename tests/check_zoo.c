/*
 * tests/check_zoo.c — MXNet's Gluon model zoo run by mxc: each model's exported symbol
 * (tests/data/zoo/<model>-symbol.json, scripts/gen_model_zoo.py) is bound on the CPU
 * with every weight, auxiliary state and the input computed from their names
 * (tests/util/seeded.c, the twin of scripts/zoo_seeded.py that made MXNet's run), and
 * its inference forward must give MXNet 1.9.1's outputs (tests/data/zoo/<model>.params).
 * Tolerance: max |mxc - mxnet| <= 1e-4 * max(1, max |mxnet|) over each output
 * (mxct_seeded_expect_output).
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"
#include "tests/util/seeded.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The seeded values ------------------------------------------------------------- */

/* Values numpy computed with scripts/zoo_seeded.py (printed with float.hex()). */
static const struct {
    const char *name;
    mxc_shape shape;
    int64_t index;
    float value;
} numpy_values[] = {
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 0, 0x1.8000280000000p-4f},
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 1, 0x1.2701bc0000000p-4f},
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 9407, -0x1.c32c160000000p-5f},
    {"resnetv10_batchnorm0_running_var", {1, {64}}, 0, 0x1.857bb00000000p-1f},
    {"resnetv10_batchnorm0_running_var", {1, {64}}, 63, 0x1.f522080000000p-1f},
    {"resnetv10_dense0_bias", {1, {1000}}, 0, -0x1.cfcf600000000p-7f},
    {"resnetv10_dense0_bias", {1, {1000}}, 999, 0x1.238ee80000000p-5f},
    {"encoder_layernorm0_gamma", {1, {32}}, 5, 0x1.b7f5300000000p-1f},
    {"data", {4, {1, 3, 32, 32}}, 0, 0x1.3a77700000000p-3f},
    {"data", {4, {1, 3, 32, 32}}, 3071, 0x1.d6dce00000000p-2f},
};

/* zoo_seeded.tokens("data", (2, 5), 50), the LSTM language model's input. */
static const float numpy_tokens[10] = {28, 5, 24, 4, 33, 21, 18, 21, 22, 28};

START_TEST(test_seeded_values_equal_numpy) {
    ck_assert_uint_eq(mxct_seeded_hash("resnetv10_conv0_weight"), 0x9967eb126ddbc90bull);
    for (size_t i = 0; i < sizeof numpy_values / sizeof numpy_values[0]; i++) {
        const mxc_shape *s = &numpy_values[i].shape;
        int64_t n = 1;
        for (int d = 0; d < s->ndim; d++)
            n *= s->dims[d];
        float *v = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(v);
        mxct_seeded_values(numpy_values[i].name, s, v);
        float got = v[numpy_values[i].index];
        free(v);
        ck_assert_msg(memcmp(&got, &numpy_values[i].value, sizeof got) == 0,
                      "%s[%lld]: C %a, numpy %a", numpy_values[i].name,
                      (long long)numpy_values[i].index, (double)got, (double)numpy_values[i].value);
    }
}
END_TEST

START_TEST(test_seeded_tokens_equal_numpy) {
    float tokens[10];
    mxct_seeded_tokens("data", 10, 50, tokens);
    for (int i = 0; i < 10; i++)
        ck_assert_msg(tokens[i] == numpy_tokens[i], "token %d: C %g, numpy %g", i,
                      (double)tokens[i], (double)numpy_tokens[i]);
}
END_TEST

/* The ranges the formula promises: weights within sqrt(6 / fan_in), variances positive. */
START_TEST(test_seeded_value_ranges) {
    float w[4 * 3 * 5 * 5], var[100], u = 1.0f;
    mxct_seeded_values("m_conv0_weight", &SHAPE(4, 3, 5, 5), w);
    mxct_seeded_values("m_batchnorm0_running_var", &SHAPE(100), var);
    float bound = sqrtf(6.0f / 75.0f), wmax = 0.0f;
    for (int i = 0; i < 300; i++)
        wmax = fmaxf(wmax, fabsf(w[i]));
    ck_assert_float_le(wmax, bound);
    ck_assert_float_gt(wmax, 0.9f * bound);
    for (int i = 0; i < 100; i++) {
        ck_assert_float_ge(var[i], 0.75f);
        ck_assert_float_lt(var[i], 1.25f);
    }
    for (int i = 0; i < 1000; i++)
        u = fminf(u, mxct_seeded_unit(7, i));
    ck_assert_float_ge(u, 0.0f);
    ck_assert_float_lt(u, 0.01f);
}
END_TEST

/* ---- The models -------------------------------------------------------------------- */

struct zoo_model {
    const char *name;
    mxc_shape input; /* "data", as scripts/gen_model_zoo.py ran it */
    int64_t vocab;   /* > 0: the input is word ids in [0, vocab) (mxct_seeded_tokens) */
};

static const struct zoo_model models[] = {
    {"resnet18_v1", {4, {1, 3, 32, 32}}, 0},
    {"resnet18_v2", {4, {1, 3, 32, 32}}, 0},
    {"mobilenet1.0", {4, {1, 3, 32, 32}}, 0},
    {"mobilenetv2_1.0", {4, {1, 3, 32, 32}}, 0},
    {"vgg11_bn", {4, {1, 3, 32, 32}}, 0},
    {"alexnet", {4, {1, 3, 63, 63}}, 0},
    {"squeezenet1.1", {4, {1, 3, 209, 209}}, 0},
    {"densenet121", {4, {1, 3, 224, 224}}, 0},
    {"inceptionv3", {4, {1, 3, 299, 299}}, 0},
    {"transformer_encoder", {3, {2, 6, 32}}, 0},
    {"lstm_lm", {2, {2, 5}}, 50},
};
#define NUM_MODELS ((int)(sizeof models / sizeof models[0]))

static mxc_ndarray *find(size_t n, mxc_ndarray **arrays, char **names, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return arrays[i];
    return NULL;
}

/* Loads models[_i], binds it with seeded values, runs inference and compares. */
START_TEST(test_model_equals_mxnet) {
    const struct zoo_model *m = &models[_i];
    char path[256];
    mxc_symbol *sym = NULL;
    snprintf(path, sizeof path, "tests/data/zoo/%s-symbol.json", m->name);
    CK_OK(mxc_symbol_load(path, &sym));
    size_t nref = 0;
    mxc_ndarray **ref = NULL;
    char **ref_names = NULL;
    snprintf(path, sizeof path, "tests/data/zoo/%s.params", m->name);
    CK_OK(mxc_nd_load(path, mxc_cpu(), &nref, &ref, &ref_names));

    const char *input = "data";
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 1, &input, &m->input, MXC_GRAD_NULL, &x));
    mxct_seeded_fill_executor(x, sym);

    /* The seeded input (the first argument, "data") is the one MXNet ran. */
    mxc_ndarray *head = find(nref, ref, ref_names, "data_head");
    ck_assert_ptr_nonnull(head);
    float want[64], got[64];
    int64_t nh = mxc_nd_size(head);
    ck_assert_int_le(nh, 64);
    CK_OK(mxc_nd_sync_copy_to_cpu(head, want, (size_t)nh * sizeof(float)));
    mxc_ndarray *const *args;
    const char *const *arg_names;
    int na;
    CK_OK(mxc_executor_arrays(x, NULL, &args, NULL, NULL, NULL));
    CK_OK(mxc_symbol_list_arguments(sym, &na, &arg_names));
    ck_assert_str_eq(arg_names[0], "data");
    if (m->vocab > 0) {
        int64_t n = mxc_nd_size(args[0]);
        float *ids = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(ids);
        mxct_seeded_tokens("data", n, m->vocab, ids);
        CK_OK(mxc_nd_sync_copy_from_cpu(args[0], ids, (size_t)n * sizeof(float)));
        free(ids);
    }
    mxc_ndarray *first = NULL;
    CK_OK(mxc_nd_reshape(args[0], &SHAPE(mxc_nd_size(args[0])), &first));
    mxc_ndarray *slice = NULL;
    CK_OK(mxc_nd_slice(first, 0, nh, &slice));
    CK_OK(mxc_nd_sync_copy_to_cpu(slice, got, (size_t)nh * sizeof(float)));
    mxc_nd_free(slice);
    mxc_nd_free(first);
    ck_assert_msg(memcmp(got, want, (size_t)nh * sizeof(float)) == 0, "%s: seeded input differs",
                  m->name);

    CK_OK(mxc_executor_forward(x, 0));
    int no, nout;
    mxc_ndarray *const *outs;
    const char *const *out_names;
    CK_OK(mxc_executor_outputs(x, &no, &outs));
    CK_OK(mxc_symbol_list_outputs(sym, &nout, &out_names));
    ck_assert_int_eq(no, nout);
    for (int i = 0; i < no; i++) {
        char key[32], what[256];
        snprintf(key, sizeof key, "out%d", i);
        mxc_ndarray *w = find(nref, ref, ref_names, key);
        ck_assert_msg(w != NULL, "%s: no reference %s", m->name, key);
        snprintf(what, sizeof what, "%s: %s", m->name, out_names[i]);
        mxct_seeded_expect_output(what, outs[i], w);
    }
    mxc_executor_free(x);
    mxc_nd_list_free(nref, ref, ref_names);
    mxc_symbol_free(sym);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("zoo");
    TCase *tc = tcase_create("seeded");
    tcase_add_test(tc, test_seeded_values_equal_numpy);
    tcase_add_test(tc, test_seeded_value_ranges);
    tcase_add_test(tc, test_seeded_tokens_equal_numpy);
    suite_add_tcase(s, tc);
    tc = tcase_create("models");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_loop_test(tc, test_model_equals_mxnet, 0, NUM_MODELS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
