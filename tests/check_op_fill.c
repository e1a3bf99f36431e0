/*
 * tests/check_op_fill.c — the fill operators: _zeros, _ones and _full (no inputs, a 0 in
 * `shape` meaning unknown, filled in by the consumers as in MXNet 1.x) and zeros_like /
 * ones_like. Values through the harness and mxc_imperative_invoke; shape inference from a
 * consumer through a symbol and an executor (forward and the gradient of the other input),
 * conflicts between the known dims and the consumer's shape; parameters (MXNet 1.9.1's
 * names and defaults: shape (), ctx '' ignored, dtype float32, _full's value required) and
 * their errors. The values are constants, so no reference files are needed.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <string.h>

/* Every element of `a` (n floats, n <= 16) is `want`. */
static void expect_all(const mxc_ndarray *a, int64_t n, float want, const char *what) {
    float got[16];
    ck_assert_int_le(n, 16);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, (size_t)n * sizeof(float)));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want, "%s: element %d is %g, want %g", what, (int)i, got[i], want);
}

/* ---- Values ------------------------------------------------------------------------ */

START_TEST(test_fill_values) {
    const struct {
        const char *op;
        struct mxct_params kv;
        mxc_shape shape;
        float value;
    } cases[] = {
        {"_zeros", MXCT_KV("shape", "(2, 3)"), SHAPE(2, 3), 0.0f},
        {"_ones", MXCT_KV("shape", "(4,)", "dtype", "float32"), SHAPE(4), 1.0f},
        {"_full", MXCT_KV("shape", "(1, 2, 2)", "value", "-2.5", "ctx", "gpu(1)"), SHAPE(1, 2, 2),
         -2.5f},
    };
    for (size_t k = 0; k < MXC_ARRAY_SIZE(cases); k++) {
        struct mxct_tensor out[1];
        CK_OK(mxct_op_forward(cases[k].op, cases[k].kv, false, NULL, 0, NULL, out));
        mxct_expect_shape(&out[0].shape, &cases[k].shape, cases[k].op);
        float want[16];
        for (int i = 0; i < 16; i++)
            want[i] = cases[k].value;
        mxct_expect_close(&out[0], want, 0, 0, cases[k].op);
        mxct_tensors_free(out, 1);
    }
}
END_TEST

/* zeros_like / ones_like: the input's shape, a constant, and a zero gradient. */
START_TEST(test_like_values) {
    const char *ops[] = {"zeros_like", "ones_like"};
    for (int k = 0; k < 2; k++) {
        struct mxct_tensor in = mxct_tensor_random(SHAPE(3, 4), -2, 2, 7), out[1], grad[1];
        CK_OK(mxct_op_forward(ops[k], MXCT_NO_PARAMS, false, &in, 1, NULL, out));
        mxct_expect_shape(&out[0].shape, &in.shape, ops[k]);
        float want[12], zeros[12] = {0};
        for (int i = 0; i < 12; i++)
            want[i] = (float)k;
        mxct_expect_close(&out[0], want, 0, 0, ops[k]);
        struct mxct_tensor head = mxct_tensor_random(SHAPE(3, 4), -1, 1, 8);
        CK_OK(mxct_op_backward(ops[k], MXCT_NO_PARAMS, true, &in, 1, NULL, &head, grad));
        mxct_expect_close(&grad[0], zeros, 0, 0, ops[k]);
        mxct_op_gradcheck(ops[k], MXCT_NO_PARAMS, true, &in, 1, NULL, 0, 1e-3, 1e-3, 1e-6);
        mxct_tensors_free(out, 1);
        mxct_tensors_free(grad, 1);
        mxct_tensors_free(&head, 1);
        mxct_tensors_free(&in, 1);
    }
}
END_TEST

/* Through mxc_imperative_invoke and the engine: no inputs, a new output array. */
START_TEST(test_invoke) {
    const char *keys[] = {"shape", "value"}, *vals[] = {"(2, 3)", "7"};
    mxc_ndarray *out = NULL;
    CK_OK(mxc_imperative_invoke("_full", 2, keys, vals, 0, NULL, 1, &out, 0));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(out, &s));
    mxct_expect_shape(&s, &SHAPE(2, 3), "_full output");
    expect_all(out, 6, 7.0f, "_full");
    /* into a given array */
    CK_OK(mxc_imperative_invoke("_zeros", 1, keys, vals, 0, NULL, 1, &out, 0));
    expect_all(out, 6, 0.0f, "_zeros into an array");
    mxc_ndarray *like = NULL;
    CK_OK(mxc_imperative_invoke("ones_like", 0, NULL, NULL, 1, &out, 1, &like, 0));
    expect_all(like, 6, 1.0f, "ones_like");
    mxc_nd_free(like);
    /* imperatively nothing fills in an unknown dim */
    const char *unk[] = {"(2, 0)"};
    mxc_ndarray *none = NULL;
    CK_ERR(MXC_ESHAPE, mxc_imperative_invoke("_ones", 1, keys, unk, 0, NULL, 1, &none, 0));
    ck_assert_ptr_null(none);
    mxc_nd_free(out);
}
END_TEST

/* ---- Inference from a consumer ----------------------------------------------------- */

/* op(shape=shape, value=2) + x, with x bound as (2, 3). */
static mxc_symbol *fill_plus_x(const char *op, const char *shape) {
    const char *keys[] = {"shape", "value"}, *vals[] = {shape, "2"};
    mxc_symbol *f = mxct_sym_apply(op, "f", 0, NULL, strcmp(op, "_full") == 0 ? 2 : 1, keys, vals);
    mxc_symbol *in[2] = {f, mxct_sym_var("x")};
    return mxct_sym_apply("elemwise_add", "y", 2, in, 0, NULL, NULL);
}

/* The unknown dims come from the consumer; the executor runs forward and backward. */
START_TEST(test_infer_from_consumer) {
    static const struct {
        const char *op, *shape;
        float value;
    } cases[] = {
        {"_zeros", "(2, 0)", 0.0f},
        {"_ones", "(0, 3)", 1.0f},
        {"_full", "(0, 0)", 2.0f},
        {"_full", "()", 2.0f}, /* no dims at all: unknown */
    };
    for (size_t k = 0; k < MXC_ARRAY_SIZE(cases); k++) {
        mxc_symbol *y = fill_plus_x(cases[k].op, cases[k].shape);
        const char *names[] = {"x"};
        mxc_shape arg_s[1], out_s[1];
        int unknown = -1;
        CK_OK(
            mxc_symbol_infer_shape(y, 1, names, &SHAPE(2, 3), arg_s, out_s, NULL, &unknown, NULL));
        ck_assert_int_eq(unknown, 0);
        mxct_expect_shape(&out_s[0], &SHAPE(2, 3), cases[k].op);
        mxc_ndarray *arg = NULL, *grad = NULL, *head = NULL;
        CK_OK(mxc_nd_full(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), 1.5, &arg));
        CK_OK(mxc_nd_zeros(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &grad));
        CK_OK(mxc_nd_full(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), 3.0, &head));
        int req = MXC_GRAD_WRITE, no;
        mxc_executor *x = NULL;
        CK_OK(mxc_executor_bind(y, mxc_cpu(), 1, &arg, &grad, &req, 0, NULL, &x));
        CK_OK(mxc_executor_forward(x, 1));
        mxc_ndarray *const *outs;
        CK_OK(mxc_executor_outputs(x, &no, &outs));
        expect_all(outs[0], 6, 1.5f + cases[k].value, cases[k].op);
        CK_OK(mxc_executor_backward(x, 1, &head));
        expect_all(grad, 6, 3.0f, "gradient of x past the fill");
        mxc_nd_free(arg);
        mxc_nd_free(grad);
        mxc_nd_free(head);
        mxc_executor_free(x);
        mxc_symbol_free(y);
    }
}
END_TEST

/* A consumer's shape that contradicts the known dims or the rank is MXC_ESHAPE naming
 * both; a dim nothing determines leaves the output unknown, which binding refuses. */
START_TEST(test_infer_conflicts) {
    const char *names[] = {"x"};
    mxc_shape arg_s[1], out_s[1];
    mxc_symbol *y = fill_plus_x("_zeros", "(3, 0)");
    int rc = mxc_symbol_infer_shape(y, 1, names, &SHAPE(2, 3), arg_s, out_s, NULL, NULL, NULL);
    CK_ERR_HAS(rc, MXC_ESHAPE, "_zeros", "(2, 3)", "(3, 0)");
    mxc_symbol_free(y);
    y = fill_plus_x("_full", "(2, 0, 1)");
    rc = mxc_symbol_infer_shape(y, 1, names, &SHAPE(2, 3), arg_s, out_s, NULL, NULL, NULL);
    CK_ERR_HAS(rc, MXC_ESHAPE, "_full", "(2, 3)", "(2, 0, 1)");
    mxc_symbol_free(y);

    const char *keys[] = {"shape"}, *vals[] = {"(2, 0)"};
    mxc_symbol *alone = mxct_sym_apply("_ones", "alone", 0, NULL, 1, keys, vals);
    int unknown = -1;
    CK_OK(mxc_symbol_infer_shape(alone, 0, NULL, NULL, NULL, out_s, NULL, &unknown, NULL));
    ck_assert_int_eq(out_s[0].ndim, 0);
    mxc_executor *x = NULL;
    rc = mxc_executor_simple_bind(alone, mxc_cpu(), 0, NULL, NULL, MXC_GRAD_NULL, &x);
    CK_ERR_HAS(rc, MXC_ESHAPE, "alone", "unknown");
    ck_assert_ptr_null(x);
    mxc_symbol_free(alone);
}
END_TEST

/* ---- Parameters -------------------------------------------------------------------- */

/* The table as MXNet 1.9.1 has it: shape (), ctx '', dtype float32; value required. */
START_TEST(test_params) {
    const struct mxc__op_def *d = mxc__op_find("_full");
    ck_assert_ptr_nonnull(d);
    const char *want[][2] = {{"shape", "()"}, {"ctx", ""}, {"dtype", "float32"}, {"value", NULL}};
    ck_assert_int_eq(d->num_params, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(d->params[i].name, want[i][0]);
        if (want[i][1])
            ck_assert_str_eq(d->params[i].default_value, want[i][1]);
        else
            ck_assert_ptr_null(d->params[i].default_value);
    }
    ck_assert_int_eq(mxc__op_find("_zeros")->num_params, 3);
    ck_assert_int_eq(mxc__op_find("_zeros")->backward_cpu == NULL, 1);
    /* ctx is kept as given (a saved symbol writes it back) */
    _Alignas(16) unsigned char params[256];
    const char *keys[] = {"ctx", "value"}, *vals[] = {"cpu_pinned(0)", "1"};
    ck_assert_uint_le(d->param_size, sizeof params);
    CK_OK(mxc__op_parse_params(d, 2, keys, vals, params));
    char buf[64];
    mxc__op_format_param(&d->params[1], params, buf, sizeof buf);
    ck_assert_str_eq(buf, "cpu_pinned(0)");

    /* and survives a JSON round trip, the unknown dim included */
    const char *sk[] = {"shape", "ctx", "value"}, *sv[] = {"(2, 0)", "gpu(1)", "0.5"};
    mxc_symbol *f = mxct_sym_apply("_full", "f", 0, NULL, 3, sk, sv), *back = NULL;
    const char *json = NULL, *again = NULL;
    CK_OK(mxc_symbol_save_json(f, &json));
    ck_assert_msg(strstr(json, "gpu(1)") && strstr(json, "(2, 0)"), "%s", json);
    CK_OK(mxc_symbol_load_json(json, &back));
    CK_OK(mxc_symbol_save_json(back, &again));
    ck_assert_str_eq(json, again);
    mxc_symbol_free(back);
    mxc_symbol_free(f);
}
END_TEST

static int invoke(const char *op, struct mxct_params kv) {
    mxc_ndarray *out = NULL;
    mxc_clear_error();
    int rc = mxc_imperative_invoke(op, kv.num, kv.keys, kv.vals, 0, NULL, 1, &out, 0);
    mxc_nd_free(out);
    return rc;
}

START_TEST(test_bad_params) {
    CK_ERR_HAS(invoke("_zeros", MXCT_KV("shape", "(2, 3)", "dtype", "int32")), MXC_ENOTSUP,
               "_zeros", "int32", "float32");
    CK_ERR_HAS(invoke("_ones", MXCT_KV("shape", "(2, 3)", "dtype", "int16")), MXC_EINVAL, "_ones",
               "dtype", "int16");
    CK_ERR_HAS(invoke("_zeros", MXCT_KV("shape", "(2, -1)")), MXC_EINVAL, "_zeros", "(2, -1)",
               "negative");
    CK_ERR_HAS(invoke("_zeros", MXCT_KV("shape", "(2, x)")), MXC_EINVAL, "_zeros", "shape");
    CK_ERR_HAS(invoke("_full", MXCT_KV("shape", "(2, 3)")), MXC_EINVAL, "_full", "value");
    CK_ERR_HAS(invoke("_full", MXCT_KV("shape", "(2, 3)", "value", "abc")), MXC_EINVAL, "_full",
               "value", "abc");
    char ctx[MXC__PARAM_STRING_MAX + 1];
    memset(ctx, 'c', sizeof ctx - 1);
    ctx[sizeof ctx - 1] = '\0';
    CK_ERR_HAS(invoke("_ones", MXCT_KV("shape", "(2, 3)", "ctx", ctx)), MXC_EINVAL, "_ones", "ctx",
               "longer");
    CK_ERR_HAS(invoke("_ones", MXCT_KV("shape", "(2, 3)", "axis", "1")), MXC_EINVAL, "_ones",
               "axis");
    /* no inputs: one given is refused */
    mxc_ndarray *a = NULL, *out = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(2), MXC_FLOAT32, mxc_cpu(), &a));
    const char *k[] = {"shape"}, *v[] = {"(2,)"};
    CK_ERR(MXC_EINVAL, mxc_imperative_invoke("_zeros", 1, k, v, 1, &a, 1, &out, 0));
    mxc_nd_free(a);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_fill");
    TCase *tc = tcase_create("values");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_fill_values);
    tcase_add_test(tc, test_like_values);
    tcase_add_test(tc, test_invoke);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_infer_from_consumer);
    tcase_add_test(tc, test_infer_conflicts);
    suite_add_tcase(s, tc);

    tc = tcase_create("params");
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_bad_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
