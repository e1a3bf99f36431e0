/*
 * tests/check_operator.c — the operator framework: the parameter parser (every type,
 * defaults, bounds, unknown and missing keys, printing back), the registry and its
 * introspection, mxc_imperative_invoke (inference, created and given outputs, misuse),
 * and the element-wise family: values and finite-difference gradients of every member.
 */
#include "mxc/op.h"
#include "ndarray/ndarray_impl.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The parser, on a table with every parameter type ------------------------------ */

struct every_type {
    int i;
    float f;
    double d;
    bool b;
    int e;
    mxc_shape t;
    struct mxc__opt_float of;
    int oe;
    int req;
};

static const char *const colours[] = {"red", "green", "blue", NULL};

static const struct mxc__param every_params[] = {
    MXC__P_INT(struct every_type, i, "3", 1, 10, "an int in [1, 10]"),
    MXC__P_FLOAT(struct every_type, f, "0.5", 0, 1, "a float in [0, 1]"),
    MXC__P_DOUBLE(struct every_type, d, "1e-3", "a double"),
    MXC__P_BOOL(struct every_type, b, "False", "a boolean"),
    MXC__P_ENUM(struct every_type, e, "green", colours, "a colour"),
    MXC__P_TUPLE(struct every_type, t, "()", "a tuple"),
    MXC__P_OPT_FLOAT(struct every_type, of, "an optional float"),
    MXC__P_OPT_ENUM(struct every_type, oe, colours, "an optional colour"),
    MXC__P_INT(struct every_type, req, NULL, 1, 0, "a required int"),
};

static const struct mxc__op_def every_def = {
    .name = "EveryType",
    .param_size = sizeof(struct every_type),
    .params = every_params,
    .num_params = (int)MXC_ARRAY_SIZE(every_params),
};

static int parse(struct mxct_params kv, struct every_type *out) {
    return mxc__op_parse_params(&every_def, kv.num, kv.keys, kv.vals, out);
}

START_TEST(test_params_defaults_and_values) {
    struct every_type p;
    ck_assert_int_eq(parse(MXCT_KV("req", "7"), &p), MXC_OK);
    ck_assert_int_eq(p.i, 3);
    ck_assert_float_eq(p.f, 0.5f);
    ck_assert_double_eq(p.d, 1e-3);
    ck_assert(!p.b);
    ck_assert_int_eq(p.e, 1);
    ck_assert_int_eq(p.t.ndim, 0);
    ck_assert(!p.of.has_value);
    ck_assert_int_eq(p.oe, -1);
    ck_assert_int_eq(p.req, 7);

    ck_assert_int_eq(parse(MXCT_KV("req", "1", "i", "10", "f", "0.25", "b", "True", "e", "blue",
                                   "t", "(3, 3)", "of", "2.5", "oe", "red", "d", "-4"),
                           &p),
                     MXC_OK);
    ck_assert_int_eq(p.i, 10);
    ck_assert_float_eq(p.f, 0.25f);
    ck_assert(p.b);
    ck_assert_int_eq(p.e, 2);
    ck_assert_int_eq(p.t.ndim, 2);
    ck_assert_int_eq(p.t.dims[0], 3);
    ck_assert_int_eq(p.t.dims[1], 3);
    ck_assert(p.of.has_value);
    ck_assert_float_eq(p.of.value, 2.5f);
    ck_assert_int_eq(p.oe, 0);
    ck_assert_double_eq(p.d, -4);

    /* MXNet's other spellings of tuples and booleans; symbol hints are ignored */
    static const char *const tuples[][2] = {{"(2,)", "1"}, {"[4,5]", "2"},
                                            {"6", "1"},    {"(1L, 2L)", "2"},
                                            {"()", "0"},   {" ( 7 , 8 ) ", "2"}};
    for (size_t k = 0; k < MXC_ARRAY_SIZE(tuples); k++) {
        ck_assert_msg(parse(MXCT_KV("req", "1", "t", tuples[k][0]), &p) == MXC_OK, "%s: %s",
                      tuples[k][0], mxc_last_error());
        ck_assert_int_eq(p.t.ndim, atoi(tuples[k][1]));
    }
    ck_assert_int_eq(parse(MXCT_KV("req", "1", "b", "true", "__shape__", "(1, 2)"), &p), MXC_OK);
    ck_assert(p.b);
}
END_TEST

static void expect_rejected(struct mxct_params kv, const char *needle) {
    struct every_type p;
    int rc = parse(kv, &p);
    ck_assert_msg(rc == MXC_EINVAL, "expected MXC_EINVAL for '%s', got %s", needle,
                  mxc_err_name(rc));
    ck_assert_msg(strstr(mxc_last_error(), needle) != NULL, "message '%s' lacks '%s'",
                  mxc_last_error(), needle);
    ck_assert_msg(strstr(mxc_last_error(), "EveryType") != NULL, "no operator name in '%s'",
                  mxc_last_error());
}

START_TEST(test_params_errors) {
    expect_rejected(MXCT_NO_PARAMS, "required parameter 'req'");
    expect_rejected(MXCT_KV("req", "1", "colour", "red"), "valid parameters: i, f, d, b, e");
    expect_rejected(MXCT_KV("req", "1", "i", "11"), "outside [1, 10]");
    expect_rejected(MXCT_KV("req", "1", "i", "0"), "outside [1, 10]");
    expect_rejected(MXCT_KV("req", "1", "i", "2.5"), "integer");
    expect_rejected(MXCT_KV("req", "1", "i", "99999999999"), "integer");
    expect_rejected(MXCT_KV("req", "1", "f", "abc"), "number");
    expect_rejected(MXCT_KV("req", "1", "f", "1.5"), "outside [0, 1]");
    expect_rejected(MXCT_KV("req", "1", "b", "yes"), "boolean");
    expect_rejected(MXCT_KV("req", "1", "e", "purple"), "{red, green, blue}");
    expect_rejected(MXCT_KV("req", "1", "e", "None"), "{red, green, blue}");
    expect_rejected(MXCT_KV("req", "1", "t", "(3, x)"), "tuple");
    expect_rejected(MXCT_KV("req", "1", "t", "(1,2,3,4,5,6,7,8,9)"), "tuple");
    expect_rejected(MXCT_KV("req", "1", "t", "(3, 3"), "tuple");
}
END_TEST

/* Values print back as MXNet spells them, and what prints parses to the same value. */
START_TEST(test_params_print_back) {
    struct every_type p, q;
    ck_assert_int_eq(parse(MXCT_KV("req", "4", "t", "(3, 3)", "b", "True", "e", "blue", "of",
                                   "0.125", "f", "0.75"),
                           &p),
                     MXC_OK);
    static const char *const expected[] = {"3",      "0.75",  "0.001", "True", "blue",
                                           "(3, 3)", "0.125", "None",  "4"};
    const char *keys[9], *vals[9];
    char bufs[9][64];
    for (int i = 0; i < every_def.num_params; i++) {
        mxc__op_format_param(&every_params[i], &p, bufs[i], sizeof bufs[i]);
        ck_assert_str_eq(bufs[i], expected[i]);
        keys[i] = every_params[i].name;
        vals[i] = bufs[i];
    }
    ck_assert_int_eq(mxc__op_parse_params(&every_def, 9, keys, vals, &q), MXC_OK);
    ck_assert_int_eq(memcmp(&p.t, &q.t, sizeof p.t), 0);
    ck_assert_float_eq(p.of.value, q.of.value);
    ck_assert_int_eq(p.e, q.e);
    struct every_type one;
    ck_assert_int_eq(parse(MXCT_KV("req", "1", "t", "(5,)"), &one), MXC_OK);
    mxc__op_format_param(&every_params[5], &one, bufs[0], sizeof bufs[0]);
    ck_assert_str_eq(bufs[0], "(5,)");
    /* the shortest spelling that reads back: 0.9f is "0.9", not "0.899999976" */
    ck_assert_int_eq(parse(MXCT_KV("req", "1", "f", "0.9"), &one), MXC_OK);
    mxc__op_format_param(&every_params[1], &one, bufs[0], sizeof bufs[0]);
    ck_assert_str_eq(bufs[0], "0.9");
}
END_TEST

/* ---- Registry ---------------------------------------------------------------------- */

/* Every registered operator: its defaults parse, its info is complete, it has a CPU
 * forward, and it is differentiable exactly when it has a backward. */
START_TEST(test_registry_every_operator) {
    size_t n;
    const char *const *names;
    ck_assert_int_eq(mxc_op_list(&n, &names), MXC_OK);
    ck_assert_uint_ge(n, 30);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            ck_assert_msg(strcmp(names[i - 1], names[i]) < 0, "list not sorted at %s", names[i]);
        const struct mxc__op_def *def = mxc__op_find(names[i]);
        ck_assert_ptr_nonnull(def);
        _Alignas(16) unsigned char params[1024];
        int rc = mxc__op_parse_params(def, 0, NULL, NULL, params);
        bool required = false;
        for (int k = 0; k < def->num_params; k++)
            required |= def->params[k].default_value == NULL;
        ck_assert_msg(rc == (required ? MXC_EINVAL : MXC_OK), "%s: defaults: %s", names[i],
                      mxc_last_error());
        mxc_op_info info;
        ck_assert_int_eq(mxc_op_get_info(names[i], &info), MXC_OK);
        ck_assert_str_eq(info.name, names[i]);
        ck_assert_msg(info.description && *info.description, "%s: no description", names[i]);
        ck_assert(info.num_outputs >= 1 || (info.num_outputs == -1 && def->list_outputs));
        for (int k = 0; k < info.num_params; k++)
            ck_assert_msg(info.params[k].doc && *info.params[k].doc, "%s.%s: no doc", names[i],
                          info.params[k].name);
        ck_assert_msg(def->forward_cpu != NULL, "%s: no CPU forward", names[i]);
        ck_assert_msg((def->backward_cpu != NULL) == (def->backward_deps != 0),
                      "%s: backward kernel and declared dependencies disagree", names[i]);
        ck_assert(mxc_op_supports(names[i], mxc_cpu(), MXC_FLOAT32));
        ck_assert(!mxc_op_supports(names[i], mxc_gpu(0), MXC_FLOAT32) || mxc_gpu_count() > 0);
    }
    mxc_op_info info;
    ck_assert_int_eq(mxc_op_get_info("sigmod", &info), MXC_EINVAL);
    ck_assert_msg(strstr(mxc_last_error(), "did you mean 'sigmoid'"), "%s", mxc_last_error());
    ck_assert_int_eq(mxc_op_get_info(NULL, &info), MXC_EINVAL);
    ck_assert(!mxc_op_supports("no_such_op", mxc_cpu(), MXC_FLOAT32));
    ck_assert(!mxc_op_supports("relu", mxc_cpu(), MXC_INT32));
}
END_TEST

/* ---- Element-wise family ----------------------------------------------------------- */

struct ew_case {
    const char *name;
    int arity;          /* 1 or 2 (a scalar form is unary with a "scalar" param) */
    const char *scalar; /* NULL: none */
    float lo, hi;       /* input range keeping the function smooth */
    double (*f)(double a, double b, double s);
};

static double f_neg(double a, double b, double s) { return -a; }
static double f_abs(double a, double b, double s) { return fabs(a); }
static double f_sign(double a, double b, double s) { return (a > 0) - (a < 0); }
static double f_square(double a, double b, double s) { return a * a; }
static double f_sqrt(double a, double b, double s) { return sqrt(a); }
static double f_rsqrt(double a, double b, double s) { return 1 / sqrt(a); }
static double f_exp(double a, double b, double s) { return exp(a); }
static double f_log(double a, double b, double s) { return log(a); }
static double f_sin(double a, double b, double s) { return sin(a); }
static double f_cos(double a, double b, double s) { return cos(a); }
static double f_relu(double a, double b, double s) { return a > 0 ? a : 0; }
static double f_sigmoid(double a, double b, double s) { return 1 / (1 + exp(-a)); }
static double f_tanh(double a, double b, double s) { return tanh(a); }
static double f_plus(double a, double b, double s) { return a + b; }
static double f_minus(double a, double b, double s) { return a - b; }
static double f_mul(double a, double b, double s) { return a * b; }
static double f_div(double a, double b, double s) { return a / b; }
static double f_max(double a, double b, double s) { return a >= b ? a : b; }
static double f_min(double a, double b, double s) { return a <= b ? a : b; }
static double f_pow(double a, double b, double s) { return pow(a, b); }
static double f_plus_s(double a, double b, double s) { return a + s; }
static double f_minus_s(double a, double b, double s) { return a - s; }
static double f_rminus_s(double a, double b, double s) { return s - a; }
static double f_mul_s(double a, double b, double s) { return a * s; }
static double f_div_s(double a, double b, double s) { return a / s; }
static double f_rdiv_s(double a, double b, double s) { return s / a; }
static double f_max_s(double a, double b, double s) { return a >= s ? a : s; }
static double f_min_s(double a, double b, double s) { return a <= s ? a : s; }
static double f_pow_s(double a, double b, double s) { return pow(a, s); }
static double f_smooth_l1(double a, double b, double s) {
    return fabs(a) < 1 / (s * s) ? 0.5 * s * s * a * a : fabs(a) - 0.5 / (s * s);
}

/* Ranges avoid the kinks (0 for abs/relu/sign, the max/min crossing) where finite
 * differences are not derivatives. */
static const struct ew_case ew_cases[] = {
    {"negative", 1, NULL, -2, 2, f_neg},
    {"abs", 1, NULL, 0.2f, 2, f_abs},
    {"sign", 1, NULL, 0.2f, 2, f_sign},
    {"square", 1, NULL, -2, 2, f_square},
    {"sqrt", 1, NULL, 0.5f, 3, f_sqrt},
    {"rsqrt", 1, NULL, 0.5f, 3, f_rsqrt},
    {"exp", 1, NULL, -2, 2, f_exp},
    {"log", 1, NULL, 0.5f, 3, f_log},
    {"sin", 1, NULL, -2, 2, f_sin},
    {"cos", 1, NULL, -2, 2, f_cos},
    {"relu", 1, NULL, 0.2f, 2, f_relu},
    {"sigmoid", 1, NULL, -3, 3, f_sigmoid},
    {"tanh", 1, NULL, -2, 2, f_tanh},
    {"_plus", 2, NULL, -2, 2, f_plus},
    {"_minus", 2, NULL, -2, 2, f_minus},
    {"_mul", 2, NULL, -2, 2, f_mul},
    {"_div", 2, NULL, 0.5f, 2, f_div},
    {"_maximum", 2, NULL, -2, 2, f_max},
    {"_minimum", 2, NULL, -2, 2, f_min},
    {"_power", 2, NULL, 0.5f, 2, f_pow},
    {"_plus_scalar", 1, "1.5", -2, 2, f_plus_s},
    {"_minus_scalar", 1, "1.5", -2, 2, f_minus_s},
    {"_rminus_scalar", 1, "1.5", -2, 2, f_rminus_s},
    {"_mul_scalar", 1, "-2.5", -2, 2, f_mul_s},
    {"_div_scalar", 1, "4", -2, 2, f_div_s},
    {"_rdiv_scalar", 1, "3", 0.5f, 2, f_rdiv_s},
    {"_maximum_scalar", 1, "0.1", 0.3f, 2, f_max_s},
    {"_minimum_scalar", 1, "0.1", 0.3f, 2, f_min_s},
    {"_power_scalar", 1, "2.5", 0.5f, 2, f_pow_s},
    {"smooth_l1", 1, "1.5", -2, 2, f_smooth_l1},
};

static struct mxct_params ew_params(const struct ew_case *c) {
    return c->scalar ? MXCT_KV("scalar", c->scalar) : MXCT_NO_PARAMS;
}

START_TEST(test_elemwise_values) {
    const struct ew_case *c = &ew_cases[_i];
    int64_t d[2] = {3, 5};
    mxc_shape shape = mxc_shape_make(2, d);
    struct mxct_tensor in[2] = {mxct_tensor_random(shape, c->lo, c->hi, 1),
                                mxct_tensor_random(shape, c->lo, c->hi, 2)};
    if (strcmp(c->name, "_maximum") == 0 || strcmp(c->name, "_minimum") == 0)
        for (int i = 0; i < 15; i += 3)
            in[1].data[i] = in[0].data[i]; /* ties go to the left operand */
    struct mxct_tensor out[1];
    int rc = mxct_op_forward(c->name, ew_params(c), false, in, c->arity, NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->name, mxc_last_error());
    float want[15];
    double s = c->scalar ? atof(c->scalar) : 0;
    for (int i = 0; i < 15; i++)
        want[i] = (float)c->f(in[0].data[i], in[1].data[i], s);
    mxct_expect_close(&out[0], want, 2e-6, 1e-7, c->name);
    mxct_tensors_free(out, 1);
    mxct_tensors_free(in, 2);
}
END_TEST

START_TEST(test_elemwise_gradients) {
    const struct ew_case *c = &ew_cases[_i];
    int64_t d[2] = {4, 3};
    mxc_shape shape = mxc_shape_make(2, d);
    struct mxct_tensor in[2] = {mxct_tensor_random(shape, c->lo, c->hi, 3),
                                mxct_tensor_random(shape, c->lo, c->hi, 4)};
    if (strcmp(c->name, "_maximum") == 0 || strcmp(c->name, "_minimum") == 0)
        for (int i = 0; i < 12; i++) /* keep the operands apart: no crossing within eps */
            in[1].data[i] = in[0].data[i] + (i % 2 ? 0.5f : -0.5f);
    mxct_op_gradcheck(c->name, ew_params(c), true, in, c->arity, NULL, 0, 1e-3, 2e-2, 2e-3);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Imperative invoke ------------------------------------------------------------- */

static mxc_ndarray *array_of(int64_t n, const float *v) {
    mxc_shape s = mxc_shape_make(1, &n);
    mxc_ndarray *a = NULL;
    ck_assert_int_eq(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 1, &a), MXC_OK);
    ck_assert_int_eq(mxc_nd_sync_copy_from_cpu(a, v, (size_t)n * sizeof(float)), MXC_OK);
    return a;
}

START_TEST(test_invoke) {
    const float x[4] = {1, -2, 3, -4}, y[4] = {0.5f, 0.5f, 2, 2};
    mxc_ndarray *a = array_of(4, x), *b = array_of(4, y);
    mxc_ndarray *in[2] = {a, b}, *out[1] = {NULL};
    ck_assert_int_eq(mxc_imperative_invoke("_mul", 0, NULL, NULL, 2, in, 1, out, 0), MXC_OK);
    float got[4];
    ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(out[0], got, sizeof got), MXC_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(got[i], x[i] * y[i]);

    /* into a given output, in place on an input */
    const char *keys[] = {"scalar"}, *vals[] = {"10"};
    mxc_ndarray *same[1] = {a};
    ck_assert_int_eq(mxc_imperative_invoke("_plus_scalar", 1, keys, vals, 1, &a, 1, same, 0),
                     MXC_OK);
    ck_assert_ptr_eq(same[0], a);
    ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(a, got, sizeof got), MXC_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(got[i], x[i] + 10);

    /* misuse: each returns its code, and a NULL output slot stays NULL */
    mxc_ndarray *none[1] = {NULL};
    ck_assert_int_eq(mxc_imperative_invoke("nope", 0, NULL, NULL, 1, &a, 1, none, 0), MXC_EINVAL);
    ck_assert_int_eq(mxc_imperative_invoke("_mul", 0, NULL, NULL, 1, &a, 1, none, 0), MXC_EINVAL);
    ck_assert_msg(strstr(mxc_last_error(), "takes 2 inputs"), "%s", mxc_last_error());
    const char *bad_keys[] = {"scalr"};
    ck_assert_int_eq(mxc_imperative_invoke("_plus_scalar", 1, bad_keys, vals, 1, &a, 1, none, 0),
                     MXC_EINVAL);
    ck_assert_ptr_null(none[0]);
    int64_t three = 3;
    mxc_shape s3 = mxc_shape_make(1, &three);
    mxc_ndarray *short_arr = NULL;
    ck_assert_int_eq(mxc_nd_zeros(&s3, MXC_FLOAT32, mxc_cpu(), &short_arr), MXC_OK);
    mxc_ndarray *mismatched[2] = {a, short_arr};
    ck_assert_int_eq(mxc_imperative_invoke("_plus", 0, NULL, NULL, 2, mismatched, 1, none, 0),
                     MXC_ESHAPE);
    ck_assert_msg(strstr(mxc_last_error(), "(3)") && strstr(mxc_last_error(), "(4)"),
                  "both shapes should be named: %s", mxc_last_error());
    mxc_ndarray *wrong_out[1] = {short_arr};
    ck_assert_int_eq(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &a, 1, wrong_out, 0),
                     MXC_ESHAPE);
    mxc_ndarray *ints = NULL;
    ck_assert_int_eq(mxc_nd_zeros(&s3, MXC_INT32, mxc_cpu(), &ints), MXC_OK);
    ck_assert_int_eq(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &ints, 1, none, 0),
                     MXC_ENOTSUP);
    ck_assert_int_eq(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &a, 0, none, 0), MXC_EINVAL);
    mxc_ndarray *null_in[1] = {NULL};
    ck_assert_int_eq(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, null_in, 1, none, 0),
                     MXC_EMISUSE);
    mxc_ndarray *all[] = {a, b, out[0], short_arr, ints};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(all); i++)
        mxc_nd_free(all[i]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}
END_TEST

/* ---- Empty arrays (a dimension of 0) ------------------------------------------------- */

struct empty_case {
    const char *op;
    const char *kv[8]; /* key, value, ..., NULL */
    int num_in;
    mxc_shape in[3]; /* {ndim, {dims}} */
    mxc_shape out;
};

/* The operators whose kernels met empty inputs in tests/fuzz/op_params: each offset or
 * memset the NULL data pointer empty tensors had (undefined behaviour, reported by clang's
 * UBSan). */
static const struct empty_case empty_cases[] = {
    {"_power_scalar", {"scalar", "2.5"}, 1, {{4, {3, 1, 0, 4}}}, {4, {3, 1, 0, 4}}},
    {"broadcast_add", {NULL}, 2, {{3, {0, 1, 3}}, {3, {1, 4, 3}}}, {3, {0, 4, 3}}},
    {"Concat", {"num_args", "2", "dim", "0"}, 2, {{2, {0, 2}}, {2, {2, 2}}}, {2, {2, 2}}},
    {"Convolution",
     {"kernel", "(3, 3)", "num_filter", "2", "pad", "(1, 1)"},
     3,
     {{4, {0, 2, 5, 5}}, {4, {2, 2, 3, 3}}, {1, {2}}},
     {4, {0, 2, 5, 5}}},
    {"Deconvolution",
     {"kernel", "(2, 2)", "num_filter", "2", "stride", "(2, 2)"},
     2,
     {{4, {0, 2, 3, 3}}, {4, {2, 2, 2, 2}}},
     {4, {0, 2, 6, 6}}},
    {"Embedding",
     {"input_dim", "4", "output_dim", "3"},
     2,
     {{2, {0, 2}}, {2, {4, 3}}},
     {3, {0, 2, 3}}},
    {"SoftmaxOutput", {NULL}, 2, {{2, {0, 3}}, {1, {0}}}, {2, {0, 3}}},
};

/* Every array's tensor points somewhere, an empty one's too; each case runs on empty
 * inputs and gives an output of the inferred shape. */
START_TEST(test_invoke_empty) {
    const struct empty_case *c = &empty_cases[_i];
    const char *keys[4], *vals[4];
    int num_params = 0;
    while (c->kv[2 * num_params]) {
        keys[num_params] = c->kv[2 * num_params];
        vals[num_params] = c->kv[2 * num_params + 1];
        num_params++;
    }
    mxc_ndarray *in[3] = {NULL, NULL, NULL}, *out[1] = {NULL};
    for (int i = 0; i < c->num_in; i++)
        ck_assert_int_eq(mxc_nd_zeros(&c->in[i], MXC_FLOAT32, mxc_cpu(), &in[i]), MXC_OK);
    struct mxc__tensor t;
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    ck_assert_int_eq(mxc__nd_tensor(in[0], false, &t), MXC_OK);
    ck_assert_int_eq(t.size, mxc_shape_size(&c->in[0]));
    ck_assert_ptr_nonnull(t.data);
    int rc = mxc_imperative_invoke(c->op, num_params, keys, vals, c->num_in, in, 1, out, 1);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->op, mxc_last_error());
    ck_assert_int_eq(mxc_nd_wait_to_read(out[0]), MXC_OK);
    mxc_shape got;
    ck_assert_int_eq(mxc_nd_get_shape(out[0], &got), MXC_OK);
    ck_assert_int_eq(got.ndim, c->out.ndim);
    for (int d = 0; d < got.ndim; d++)
        ck_assert_int_eq(got.dims[d], c->out.dims[d]);
    for (int i = 0; i < c->num_in; i++)
        mxc_nd_free(in[i]);
    mxc_nd_free(out[0]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}
END_TEST

static Suite *operator_suite(void) {
    Suite *s = suite_create("operator");
    TCase *tc = tcase_create("params");
    tcase_add_test(tc, test_params_defaults_and_values);
    tcase_add_test(tc, test_params_errors);
    tcase_add_test(tc, test_params_print_back);
    suite_add_tcase(s, tc);

    tc = tcase_create("registry");
    tcase_add_test(tc, test_registry_every_operator);
    suite_add_tcase(s, tc);

    tc = tcase_create("elemwise");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_elemwise_values, 0, (int)MXC_ARRAY_SIZE(ew_cases));
    tcase_add_loop_test(tc, test_elemwise_gradients, 0, (int)MXC_ARRAY_SIZE(ew_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_invoke);
    tcase_add_loop_test(tc, test_invoke_empty, 0, (int)MXC_ARRAY_SIZE(empty_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(operator_suite()); }
