/*
 * tests/check_op_math.c — the math operators MXNet models use beyond the basic arithmetic:
 * element-wise functions (log1p ... arctanh, roundings, hard_sigmoid), comparisons and
 * logical operators in their plain, _scalar and broadcast_ forms, broadcast_maximum/
 * minimum/power/hypot, and the reductions min, prod, nansum, nanprod and norm. Forward
 * values and input gradients against MXNet 1.9.1 (tests/data/ops/math, made by
 * scripts/gen_op_refs_math.py), the edges of the domains included (infinities and NaN
 * where MXNet gives them); finite-difference gradients with write and add-to requests;
 * the in-place options (run by the harness with every forward and backward here); forward
 * add-to requests of the reductions; bad parameters and shapes; one run through
 * mxc_imperative_invoke and the engine.
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
#include <string.h>

/* ---- Reference cases (parameters as in scripts/gen_op_refs_math.py) ------------------ */

struct ref_case {
    const char *file; /* tests/data/ops/math/<file>.params */
    const char *op;
    int num_in;
    const char *kv[7]; /* key, value, ..., NULL */
};

/* A case whose file is named after its operator. */
#define U(op)               \
    {                       \
        op, op, 1, { NULL } \
    }
#define B(op)               \
    {                       \
        op, op, 2, { NULL } \
    }

static const struct ref_case ref_cases[] = {
    /* element-wise functions */
    U("log1p"),
    U("expm1"),
    U("floor"),
    U("ceil"),
    U("round"),
    U("rint"),
    U("trunc"),
    U("fix"),
    U("reciprocal"),
    U("erf"),
    U("softsign"),
    U("cbrt"),
    U("log2"),
    U("log10"),
    U("tan"),
    U("arcsin"),
    U("arccos"),
    U("arctan"),
    U("sinh"),
    U("cosh"),
    U("arcsinh"),
    U("arccosh"),
    U("arctanh"),
    U("degrees"),
    U("radians"),
    U("logical_not"),
    U("hard_sigmoid"),
    {"hard_sigmoid_ab", "hard_sigmoid", 1, {"alpha", "0.5", "beta", "0.25"}},
    /* comparisons and logical operators */
    {"_equal_scalar", "_equal_scalar", 1, {"scalar", "0.5"}},
    {"_not_equal_scalar", "_not_equal_scalar", 1, {"scalar", "0.5"}},
    {"_greater_scalar", "_greater_scalar", 1, {"scalar", "0.5"}},
    {"_greater_equal_scalar", "_greater_equal_scalar", 1, {"scalar", "0.5"}},
    {"_lesser_scalar", "_lesser_scalar", 1, {"scalar", "0.5"}},
    {"_lesser_equal_scalar", "_lesser_equal_scalar", 1, {"scalar", "0.5"}},
    {"_logical_and_scalar", "_logical_and_scalar", 1, {"scalar", "2"}},
    {"_logical_and_scalar_0", "_logical_and_scalar", 1, {"scalar", "0"}},
    {"_logical_or_scalar", "_logical_or_scalar", 1, {"scalar", "2"}},
    {"_logical_or_scalar_0", "_logical_or_scalar", 1, {"scalar", "0"}},
    {"_logical_xor_scalar", "_logical_xor_scalar", 1, {"scalar", "2"}},
    {"_logical_xor_scalar_0", "_logical_xor_scalar", 1, {"scalar", "0"}},
    {"_hypot_scalar", "_hypot_scalar", 1, {"scalar", "-1.5"}},
    B("_equal"),
    B("_not_equal"),
    B("_greater"),
    B("_greater_equal"),
    B("_lesser"),
    B("_lesser_equal"),
    B("_logical_and"),
    B("_logical_or"),
    B("_logical_xor"),
    B("_hypot"),
    /* broadcasting */
    B("broadcast_maximum"),
    {"broadcast_maximum_pad", "broadcast_maximum", 2, {NULL}},
    B("broadcast_minimum"),
    {"broadcast_minimum_pad", "broadcast_minimum", 2, {NULL}},
    B("broadcast_power"),
    {"broadcast_power_lhs", "broadcast_power", 2, {NULL}},
    B("broadcast_hypot"),
    B("broadcast_equal"),
    B("broadcast_not_equal"),
    B("broadcast_greater"),
    B("broadcast_greater_equal"),
    B("broadcast_lesser"),
    B("broadcast_lesser_equal"),
    B("broadcast_logical_and"),
    B("broadcast_logical_or"),
    B("broadcast_logical_xor"),
    /* reductions */
    {"min_axis1", "min", 1, {"axis", "1"}},
    {"min_all", "min", 1, {NULL}},
    {"min_exclude_keep", "min", 1, {"axis", "(0, 2)", "exclude", "True", "keepdims", "True"}},
    {"min_ties", "min", 1, {"axis", "1"}},
    {"prod_axis2", "prod", 1, {"axis", "2"}},
    {"prod_all_keep", "prod", 1, {"keepdims", "True"}},
    {"prod_axes02", "prod", 1, {"axis", "(0, 2)"}},
    {"prod_zero", "prod", 1, {"axis", "1"}},
    {"nansum_axis1", "nansum", 1, {"axis", "1"}},
    {"nansum_all", "nansum", 1, {NULL}},
    {"nansum_axis0_keep", "nansum", 1, {"axis", "0", "keepdims", "True"}},
    {"nanprod_axis1", "nanprod", 1, {"axis", "1"}},
    {"nanprod_exclude", "nanprod", 1, {"axis", "1", "exclude", "True"}},
    {"norm_all", "norm", 1, {NULL}},
    {"norm_axis1", "norm", 1, {"axis", "1"}},
    {"norm_axis_neg_keep", "norm", 1, {"axis", "-1", "keepdims", "True"}},
    {"norm_axes01", "norm", 1, {"axis", "(0, 1)"}},
    {"norm1_all", "norm", 1, {"ord", "1"}},
    {"norm1_axis2_keep", "norm", 1, {"ord", "1", "axis", "2", "keepdims", "True"}},
    {"norm_zero_row", "norm", 1, {"axis", "1"}},
    {"norm1_zero_row", "norm", 1, {"ord", "1", "axis", "1"}},
};

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    return mxct_ref_case_of("math", c->file, c->op, c->kv, c->num_in, 1);
}

START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, false, 1e-5, 1e-6);
}
END_TEST

/* The backward with out_grad = og0 against MXNet's gradients, zeros, infinities and NaN
 * included. */
START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-5, 1e-6);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in;
    mxc_shape shapes[2];
    float lo, hi; /* inputs uniform in [lo, hi): away from poles, kinks and jumps */
    const char *kv[5];
};

#define S34         \
    {               \
        2, { 3, 4 } \
    }

static const struct grad_case grad_cases[] = {
    {"log1p", 1, {S34}, -0.5f, 3, {NULL}},
    {"expm1", 1, {S34}, -2, 2, {NULL}},
    {"reciprocal", 1, {S34}, 0.5f, 2, {NULL}},
    {"erf", 1, {S34}, -2, 2, {NULL}},
    {"softsign", 1, {S34}, 0.1f, 3, {NULL}},
    {"cbrt", 1, {S34}, 0.5f, 8, {NULL}},
    {"log2", 1, {S34}, 0.5f, 4, {NULL}},
    {"log10", 1, {S34}, 0.5f, 4, {NULL}},
    {"tan", 1, {S34}, -1, 1, {NULL}},
    {"arcsin", 1, {S34}, -0.8f, 0.8f, {NULL}},
    {"arccos", 1, {S34}, -0.8f, 0.8f, {NULL}},
    {"arctan", 1, {S34}, -3, 3, {NULL}},
    {"sinh", 1, {S34}, -2, 2, {NULL}},
    {"cosh", 1, {S34}, -2, 2, {NULL}},
    {"arcsinh", 1, {S34}, -3, 3, {NULL}},
    {"arccosh", 1, {S34}, 1.2f, 4, {NULL}},
    {"arctanh", 1, {S34}, -0.8f, 0.8f, {NULL}},
    {"degrees", 1, {S34}, -3, 3, {NULL}},
    {"radians", 1, {S34}, -3, 3, {NULL}},
    {"hard_sigmoid", 1, {S34}, -2, 2, {NULL}},
    {"hard_sigmoid", 1, {S34}, -1, 1, {"alpha", "0.4", "beta", "0.3"}},
    /* the roundings and comparisons: zero gradients, which the differences agree with
     * away from the jumps (these inputs have none within eps) */
    {"floor", 1, {S34}, 0.1f, 0.9f, {NULL}},
    {"rint", 1, {S34}, 1.1f, 1.4f, {NULL}},
    {"_greater_scalar", 1, {S34}, -1, 1, {"scalar", "2"}},
    {"_lesser_equal", 2, {S34, S34}, -1, 1, {NULL}},
    {"_hypot_scalar", 1, {S34}, -2, 2, {"scalar", "0.7"}},
    {"_hypot", 2, {S34, S34}, 0.3f, 2, {NULL}},
    {"broadcast_maximum", 2, {{3, {2, 3, 4}}, {3, {1, 3, 1}}}, -2, 2, {NULL}},
    {"broadcast_minimum", 2, {{2, {3, 1}}, {3, {2, 1, 4}}}, -2, 2, {NULL}},
    {"broadcast_power", 2, {{3, {2, 3, 4}}, {2, {3, 1}}}, 0.5f, 2, {NULL}},
    {"broadcast_power", 2, {{2, {1, 4}}, {2, {3, 4}}}, 0.5f, 2, {NULL}},
    {"broadcast_hypot", 2, {{2, {3, 1}}, {2, {1, 4}}}, 0.3f, 2, {NULL}},
    {"broadcast_hypot", 2, {S34, S34}, 0.3f, 2, {NULL}},
    {"broadcast_greater", 2, {{3, {2, 3, 4}}, {1, {4}}}, -1, 1, {NULL}},
    /* reductions: min on distinct values; products and norms away from 0 */
    {"min", 1, {{3, {2, 3, 4}}}, -1, 1, {"axis", "1"}},
    {"min", 1, {{3, {2, 3, 4}}}, -1, 1, {"axis", "(0, 2)", "keepdims", "True"}},
    {"prod", 1, {{3, {2, 3, 4}}}, 0.5f, 1.5f, {"axis", "2"}},
    {"prod", 1, {S34}, 0.5f, 1.5f, {NULL}},
    {"nansum", 1, {{3, {2, 3, 4}}}, -1, 1, {"axis", "(0, 1)"}},
    {"nanprod", 1, {S34}, 0.5f, 1.5f, {"axis", "0", "exclude", "True"}},
    {"norm", 1, {{3, {2, 3, 4}}}, 0.2f, 1, {NULL}},
    {"norm", 1, {{3, {2, 3, 4}}}, 0.2f, 1, {"axis", "(0, 2)", "keepdims", "True"}},
    {"norm", 1, {S34}, 0.2f, 1, {"ord", "1", "axis", "-1"}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in[2];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], c->lo, c->hi, 20u + (unsigned)(_i * 2 + i));
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, 0, 1e-3, 2e-2, 2e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Forward add-to ------------------------------------------------------------------- */

/* The reductions' forward with an add-to request onto an output holding 1: 1 + MXNet's
 * result (their CPU kernels fold into temp space first). */
START_TEST(test_forward_add) {
    static const char *const picks[] = {"min_exclude_keep", "prod_axes02", "nansum_axis1",
                                        "nanprod_exclude",  "norm_axis1",  "norm1_all"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    const char *keys[4], *vals[4];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in, want;
    mxct_ref_load_case("math", c->file, "in", 1, &in);
    mxct_ref_load_case("math", c->file, "out", 1, &want);
    const struct mxc__op_def *def = mxc__op_find(c->op);
    _Alignas(16) unsigned char params[256];
    CK_OK(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params));
    struct mxc__resource *temp;
    CK_OK(mxc__resource_get(mxc_cpu(), def->forward_resources[0] - 1, &temp));
    int64_t n = mxc_shape_size(&want.shape);
    struct mxct_tensor got = mxct_tensor_from(want.shape, NULL);
    for (int64_t i = 0; i < n; i++) {
        got.data[i] = 1.0f;
        want.data[i] += 1.0f;
    }
    struct mxc__tensor tin = {in.data, in.shape, MXC_FLOAT32, mxc_cpu(), mxc_shape_size(&in.shape)};
    struct mxc__tensor tout = {got.data, got.shape, MXC_FLOAT32, mxc_cpu(), n};
    int req = MXC__REQ_ADD;
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {.rctx = &rctx,
                                .params = params,
                                .in_data = &tin,
                                .num_in = 1,
                                .out_data = &tout,
                                .num_out = 1,
                                .req = &req,
                                .resources = &temp,
                                .num_resources = 1};
    ck_assert_msg(def->forward_cpu(&call) == MXC_OK, "%s", mxc_last_error());
    mxct_expect_tensor(&got, &want, 1e-5, 1e-6, c->file);
    mxct_tensors_free(&got, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* ---- Parameters and shapes ----------------------------------------------------------- */

/* The forward of `op` on inputs of `shapes` (values irrelevant): its status. */
static int run_on(const char *op, struct mxct_params kv, int num_in, const mxc_shape *shapes) {
    struct mxct_tensor in[2], out[1];
    for (int i = 0; i < num_in; i++)
        in[i] = mxct_tensor_random(shapes[i], -1, 1, 5u + (unsigned)i);
    int rc = mxct_op_forward(op, kv, false, in, num_in, NULL, out);
    if (rc == MXC_OK)
        mxct_tensors_free(out, 1);
    mxct_tensors_free(in, num_in);
    return rc;
}

START_TEST(test_bad_params) {
    const mxc_shape one[1] = {S34};
    mxct_expect_error(run_on("hard_sigmoid", MXCT_KV("alpha", "steep"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("hard_sigmoid", "alpha", "steep"));
    mxct_expect_error(run_on("hard_sigmoid", MXCT_KV("gamma", "1"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("hard_sigmoid", "gamma", "alpha", "beta"));
    mxct_expect_error(run_on("_greater_scalar", MXCT_KV("scalar", "x"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("_greater_scalar", "scalar"));
    mxct_expect_error(run_on("log1p", MXCT_KV("scalar", "1"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("log1p", "scalar"));
    const mxc_shape two[2] = {S34, {2, {4, 3}}};
    mxct_expect_error(run_on("_equal", MXCT_NO_PARAMS, 2, two), MXC_ESHAPE,
                      MXCT_NEEDLES("_equal", "(3, 4)", "(4, 3)"));
    mxct_expect_error(run_on("_hypot", MXCT_NO_PARAMS, 2, two), MXC_ESHAPE,
                      MXCT_NEEDLES("_hypot", "(3, 4)", "(4, 3)"));
    const mxc_shape apart[2] = {S34, {2, {2, 4}}};
    mxct_expect_error(run_on("broadcast_maximum", MXCT_NO_PARAMS, 2, apart), MXC_ESHAPE,
                      MXCT_NEEDLES("broadcast_maximum", "(3, 4)", "(2, 4)"));
    mxct_expect_error(run_on("broadcast_lesser", MXCT_NO_PARAMS, 2, apart), MXC_ESHAPE,
                      MXCT_NEEDLES("broadcast_lesser", "(3, 4)", "(2, 4)"));
    /* reductions */
    mxct_expect_error(run_on("norm", MXCT_KV("ord", "3"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("norm", "ord"));
    mxct_expect_error(run_on("norm", MXCT_KV("ord", "0"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("norm", "ord"));
    mxct_expect_error(run_on("norm", MXCT_KV("out_dtype", "float16"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("norm", "out_dtype", "float32"));
    mxct_expect_error(run_on("norm", MXCT_KV("exclude", "True"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("norm", "exclude"));
    mxct_expect_error(run_on("norm", MXCT_KV("axis", "2"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("norm", "axis 2", "(3, 4)"));
    mxct_expect_error(run_on("min", MXCT_KV("axis", "-3"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("min", "axis -3", "(3, 4)"));
    mxct_expect_error(run_on("prod", MXCT_KV("axis", "(1, -1)"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("prod", "more than once"));
    mxct_expect_error(run_on("nanprod", MXCT_KV("keepdims", "maybe"), 1, one), MXC_EINVAL,
                      MXCT_NEEDLES("nanprod", "keepdims"));
}
END_TEST

/* The defaults MXNet spells, as mxc_op_get_info reports them. */
START_TEST(test_param_defaults) {
    mxc_op_info info;
    CK_OK(mxc_op_get_info("hard_sigmoid", &info));
    ck_assert_int_eq(info.num_params, 2);
    ck_assert_str_eq(info.params[0].name, "alpha");
    ck_assert_str_eq(info.params[0].default_value, "0.2");
    ck_assert_str_eq(info.params[1].name, "beta");
    ck_assert_str_eq(info.params[1].default_value, "0.5");
    CK_OK(mxc_op_get_info("_lesser_equal_scalar", &info));
    ck_assert_int_eq(info.num_params, 1);
    ck_assert_str_eq(info.params[0].name, "scalar");
    CK_OK(mxc_op_get_info("norm", &info));
    ck_assert_int_eq(info.num_params, 4);
    ck_assert_str_eq(info.params[0].name, "ord");
    ck_assert_str_eq(info.params[0].default_value, "2");
    ck_assert_str_eq(info.params[2].name, "out_dtype");
    ck_assert_str_eq(info.params[2].default_value, "None");
    CK_OK(mxc_op_get_info("arctanh", &info));
    ck_assert_int_eq(info.num_params, 0);
    ck_assert(info.differentiable);
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* One case of each kind through mxc_imperative_invoke, the output a new array. */
START_TEST(test_invoke) {
    static const char *const picks[] = {"rint",         "hard_sigmoid_ab", "_greater_equal_scalar",
                                        "_logical_xor", "broadcast_hypot", "nanprod_axis1",
                                        "norm_axes01"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, false, 1e-5, 1e-6);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_math");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("forward_add");
    tcase_add_loop_test(tc, test_forward_add, 0, 6);
    suite_add_tcase(s, tc);

    tc = tcase_create("params");
    tcase_add_test(tc, test_bad_params);
    tcase_add_test(tc, test_param_defaults);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, 7);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
