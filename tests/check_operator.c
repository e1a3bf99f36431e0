/*
 * tests/check_operator.c — the operator framework: the parameter parser (every type,
 * defaults, bounds, unknown and missing keys, printing back), the registry and its
 * introspection, mxc_imperative_invoke (inference, created and given outputs, misuse,
 * every variadic operator at both ends of its count parameter), the element-wise family:
 * values and finite-difference gradients of every member, and every operator that
 * declares an in-place option run under it by the harness.
 */
#include "mxc/executor.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
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
        /* what makes the MXC_ASSERTs on parameter buffers in ndarray/ unreachable */
        ck_assert_uint_le(def->param_size, MXC__ND_MAX_PARAM_BYTES);
        ck_assert_int_le(def->num_params, 64); /* operator/params.c's given[64] */
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

/* ---- In place, every operator ------------------------------------------------------ */

/* One case per operator outside the element-wise family (whose cases are ew_cases) that
 * declares an in-place option: its parameters, input shapes (auxiliary states take input
 * 0's), and one range for every input and state. */
struct inplace_case {
    const char *op;
    const char *kv[7]; /* key, value, ..., NULL */
    int num_in, num_aux;
    mxc_shape shapes[4];
    float lo, hi;
};

/* An element-wise math operator on values in every one's domain (0.1 to 0.9). */
#define EW_MATH(op, ...) \
    { op, {__VA_ARGS__}, 1, 0, {{2, {3, 4}}}, 0.1f, 0.9f }
#define EW_MATH2(op) \
    { op, {NULL}, 2, 0, {{2, {3, 4}}, {2, {3, 4}}}, 0.1f, 0.9f }

static const struct inplace_case inplace_cases[] = {
    {"Activation", {"act_type", "sigmoid"}, 1, 0, {{3, {2, 3, 4}}}, -2, 2},
    /* lengths in [0, 3): some masked, some not */
    {"SequenceMask", {"use_sequence_length", "True"}, 2, 0, {{2, {3, 4}}, {1, {4}}}, 0, 3},
    {"clip", {"a_min", "-0.5", "a_max", "0.5"}, 1, 0, {{2, {3, 5}}}, -1, 1},
    {"ElementWiseSum", {"num_args", "3"}, 3, 0, {{2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"_sleep", {"seconds", "0"}, 1, 0, {{1, {6}}}, -1, 1},
    {"Dropout", {"p", "0.5"}, 1, 0, {{2, {4, 6}}}, -1, 1},
    {"sgd_update", {"lr", "0.1", "wd", "0.01"}, 2, 0, {{2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"sgd_mom_update", {"lr", "0.1", "momentum", "0.9"}, 2, 1, {{2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    /* float32 weights here; float16 in tests/check_op_dtype.c */
    {"mp_sgd_update", {"lr", "0.1", "wd", "0.1"}, 2, 1, {{2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"mp_sgd_mom_update",
     {"lr", "0.1", "momentum", "0.9"},
     2,
     2,
     {{2, {3, 4}}, {2, {3, 4}}},
     -1,
     1},
    /* Adam's var is a sum of squares: every value positive */
    {"adam_update", {"lr", "0.01"}, 2, 2, {{2, {3, 4}}, {2, {3, 4}}}, 0.5f, 1.5f},
    {"nag_mom_update",
     {"lr", "0.1", "momentum", "0.9", "wd", "0.1"},
     2,
     1,
     {{2, {3, 4}}, {2, {3, 4}}},
     -1,
     1},
    /* RMSProp's n is a mean square; centered, n - g^2 + epsilon must stay positive */
    {"rmsprop_update", {"lr", "0.01"}, 2, 1, {{2, {3, 4}}, {2, {3, 4}}}, 0.5f, 1.5f},
    {"rmspropalex_update",
     {"lr", "0.01", "epsilon", "4"},
     2,
     3,
     {{2, {3, 4}}, {2, {3, 4}}},
     0.5f,
     1.5f},
    {"ftrl_update", {"lr", "0.1", "lamda1", "0.5"}, 2, 2, {{2, {3, 4}}, {2, {3, 4}}}, 0.5f, 1.5f},
    {"signsgd_update", {"lr", "0.1", "wd", "0.1"}, 2, 0, {{2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"signum_update", {"lr", "0.1", "momentum", "0.9"}, 2, 1, {{2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"_adamw_update",
     {"lr", "0.01", "eta", "1", "wd", "0.1"},
     3,
     2,
     {{2, {3, 4}}, {2, {3, 4}}, {1, {1}}},
     0.5f,
     1.5f},
    {"lamb_update_phase2",
     {"lr", "0.1"},
     4,
     0,
     {{2, {3, 4}}, {2, {3, 4}}, {1, {1}}, {1, {1}}},
     0.5f,
     1.5f},
    {"LinearRegressionOutput", {NULL}, 2, 0, {{2, {4, 3}}, {2, {4, 3}}}, -1, 1},
    {"LogisticRegressionOutput", {NULL}, 2, 0, {{2, {4, 3}}, {2, {4, 3}}}, -1, 1},
    {"MAERegressionOutput", {NULL}, 2, 0, {{2, {4, 3}}, {2, {4, 3}}}, -1, 1},
    {"Flatten", {NULL}, 1, 0, {{3, {2, 3, 4}}}, -1, 1},
    {"Reshape", {"shape", "(4, -1)"}, 1, 0, {{3, {2, 3, 4}}}, -1, 1},
    {"expand_dims", {"axis", "1"}, 1, 0, {{2, {3, 4}}}, -1, 1},
    {"softmax", {"axis", "1"}, 1, 0, {{3, {2, 3, 4}}}, -2, 2},
    {"log_softmax", {NULL}, 1, 0, {{2, {3, 5}}}, -2, 2},
    /* labels of data's shape: probabilities */
    {"SoftmaxOutput", {NULL}, 2, 0, {{2, {4, 5}}, {2, {4, 5}}}, 0, 1},
    /* normalisation (operator/layer_norm.c): data, gamma, beta */
    {"LayerNorm", {"axis", "1"}, 3, 0, {{3, {2, 3, 4}}, {1, {3}}, {1, {3}}}, -1, 1},
    {"InstanceNorm", {NULL}, 3, 0, {{3, {2, 3, 4}}, {1, {3}}, {1, {3}}}, -1, 1},
    {"GroupNorm", {"num_groups", "2"}, 3, 0, {{3, {2, 4, 3}}, {1, {2}}, {1, {2}}}, -1, 1},
    {"SoftmaxActivation", {"mode", "channel"}, 1, 0, {{3, {2, 3, 4}}}, -2, 2},
    {"L2Normalization", {"mode", "channel"}, 1, 0, {{3, {2, 3, 4}}}, -1, 1},
    /* indexing: operator/indexing.c */
    {"where", {NULL}, 3, 0, {{2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}}, -1, 1},
    {"_copy", {NULL}, 1, 0, {{2, {3, 4}}}, -1, 1},
    {"squeeze", {NULL}, 1, 0, {{3, {3, 1, 4}}}, -1, 1},
    /* element-wise math, comparisons, logical (values in tests/check_op_math.c) */
    EW_MATH("log1p", NULL),
    EW_MATH("expm1", NULL),
    EW_MATH("floor", NULL),
    EW_MATH("ceil", NULL),
    EW_MATH("round", NULL),
    EW_MATH("rint", NULL),
    EW_MATH("trunc", NULL),
    EW_MATH("fix", NULL),
    EW_MATH("reciprocal", NULL),
    EW_MATH("erf", NULL),
    EW_MATH("softsign", NULL),
    EW_MATH("cbrt", NULL),
    EW_MATH("log2", NULL),
    EW_MATH("log10", NULL),
    EW_MATH("tan", NULL),
    EW_MATH("arcsin", NULL),
    EW_MATH("arccos", NULL),
    EW_MATH("arctan", NULL),
    EW_MATH("sinh", NULL),
    EW_MATH("cosh", NULL),
    EW_MATH("arcsinh", NULL),
    EW_MATH("arccosh", NULL),
    EW_MATH("arctanh", NULL),
    EW_MATH("degrees", NULL),
    EW_MATH("radians", NULL),
    EW_MATH("logical_not", NULL),
    EW_MATH("zeros_like", NULL),
    EW_MATH("ones_like", NULL),
    EW_MATH("hard_sigmoid", NULL),
    EW_MATH("_hypot_scalar", "scalar", "0.5"),
    EW_MATH("_equal_scalar", "scalar", "0.5"),
    EW_MATH("_not_equal_scalar", "scalar", "0.5"),
    EW_MATH("_greater_scalar", "scalar", "0.5"),
    EW_MATH("_greater_equal_scalar", "scalar", "0.5"),
    EW_MATH("_lesser_scalar", "scalar", "0.5"),
    EW_MATH("_lesser_equal_scalar", "scalar", "0.5"),
    EW_MATH("_logical_and_scalar", "scalar", "0.5"),
    EW_MATH("_logical_or_scalar", "scalar", "0.5"),
    EW_MATH("_logical_xor_scalar", "scalar", "0.5"),
    EW_MATH2("_hypot"),
    EW_MATH2("_equal"),
    EW_MATH2("_not_equal"),
    EW_MATH2("_greater"),
    EW_MATH2("_greater_equal"),
    EW_MATH2("_lesser"),
    EW_MATH2("_lesser_equal"),
    EW_MATH2("_logical_and"),
    EW_MATH2("_logical_or"),
    EW_MATH2("_logical_xor"),
};

/* The case of operator `op` (from ew_cases for the element-wise family); false if none. */
static bool inplace_case_of(const char *op, struct inplace_case *c) {
    for (size_t i = 0; i < MXC_ARRAY_SIZE(inplace_cases); i++)
        if (strcmp(inplace_cases[i].op, op) == 0) {
            *c = inplace_cases[i];
            return true;
        }
    for (size_t i = 0; i < MXC_ARRAY_SIZE(ew_cases); i++) {
        const struct ew_case *e = &ew_cases[i];
        if (strcmp(e->name, op) == 0) {
            *c = (struct inplace_case){e->name, {NULL}, e->arity, 0, {{0}}, e->lo, e->hi};
            c->kv[0] = e->scalar ? "scalar" : NULL;
            c->kv[1] = e->scalar;
            for (int k = 0; k < e->arity; k++)
                c->shapes[k] = (mxc_shape){2, {3, 4}};
            return true;
        }
    }
    return false;
}

/* Every operator that declares an in-place option has a case, and the harness runs it
 * under each option (forward and backward, aliased as the executor's planner aliases):
 * an operator cannot declare one that no test exercises. */
START_TEST(test_inplace_every_operator) {
    size_t n;
    const char *const *names;
    ck_assert_int_eq(mxc_op_list(&n, &names), MXC_OK);
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        const struct mxc__op_def *def = mxc__op_find(names[i]);
        if (!def->inplace.in1 && !def->backward_inplace.in1)
            continue;
        struct inplace_case c;
        ck_assert_msg(inplace_case_of(names[i], &c),
                      "%s declares an in-place option but has no case in inplace_cases "
                      "(tests/check_operator.c) for the harness to run it in place",
                      names[i]);
        const char *keys[4], *vals[4];
        int nkv = 0;
        for (; c.kv[2 * nkv]; nkv++) {
            keys[nkv] = c.kv[2 * nkv];
            vals[nkv] = c.kv[2 * nkv + 1];
        }
        struct mxct_tensor in[4], aux[3];
        for (int k = 0; k < c.num_in; k++)
            in[k] = mxct_tensor_random(c.shapes[k], c.lo, c.hi, 50u + (unsigned)k);
        for (int k = 0; k < c.num_aux; k++)
            aux[k] = mxct_tensor_random(c.shapes[0], c.lo, c.hi, 60u + (unsigned)k);
        mxct_op_check_inplace(names[i], (struct mxct_params){nkv, keys, vals}, true, in, c.num_in,
                              c.num_aux ? aux : NULL);
        mxct_tensors_free(in, c.num_in);
        mxct_tensors_free(aux, c.num_aux);
        checked++;
    }
    ck_assert_int_ge(checked, (int)(MXC_ARRAY_SIZE(ew_cases) + MXC_ARRAY_SIZE(inplace_cases)));
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

/* An output may share an input's memory only where the kernel can compute in place: the
 * operator's declared pair (and, over it, the same array passed again) or any argument
 * of an element-wise operator. transpose(a, out = a) used to return MXC_OK with a
 * scrambled matrix (1 4 7 4 5 8 7 8 9). */
START_TEST(test_invoke_output_sharing_an_input) {
    const float m[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    mxc_ndarray *a = array_of(9, m), *t = NULL;
    CK_OK(mxc_nd_reshape(a, &SHAPE(3, 3), &t));
    mxc_ndarray *in[2] = {t, NULL}, *out[2] = {t, NULL};
    CK_ERR(MXC_EINVAL, mxc_imperative_invoke("transpose", 0, NULL, NULL, 1, in, 1, out, 0));
    ck_assert_msg(strstr(mxc_last_error(), "transpose: output output shares memory with input"),
                  "%s", mxc_last_error());
    float got[9];
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, sizeof got));
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(got[i], m[i]); /* nothing was pushed */

    /* element-wise: out = rhs, out = both operands */
    mxc_ndarray *b = array_of(9, m);
    in[0] = a;
    in[1] = b;
    out[0] = b;
    CK_OK(mxc_imperative_invoke("_minus", 0, NULL, NULL, 2, in, 1, out, 0));
    CK_OK(mxc_nd_sync_copy_to_cpu(b, got, sizeof got));
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(got[i], 0);
    in[1] = a;
    out[0] = a;
    CK_OK(mxc_imperative_invoke("_plus", 0, NULL, NULL, 2, in, 1, out, 0));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, sizeof got));
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(got[i], 2 * m[i]);

    /* the declared pair of a non-element-wise operator, with the same array again */
    const char *one[] = {"3"};
    const char *num_args[] = {"num_args"};
    mxc_ndarray *three[3] = {a, b, a};
    out[0] = a;
    CK_OK(mxc_imperative_invoke("ElementWiseSum", 1, num_args, one, 3, three, 1, out, 0));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, sizeof got));
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(got[i], 4 * m[i]);
    out[0] = b; /* over input 1: not its pair */
    CK_ERR(MXC_EINVAL,
           mxc_imperative_invoke("ElementWiseSum", 1, num_args, one, 3, three, 1, out, 0));

    /* overlapping parts of one array, and two outputs in one place */
    mxc_ndarray *lo = NULL, *hi = NULL;
    CK_OK(mxc_nd_slice(t, 0, 2, &lo));
    CK_OK(mxc_nd_slice(t, 1, 3, &hi));
    in[0] = lo;
    out[0] = hi;
    CK_ERR(MXC_EINVAL, mxc_imperative_invoke("relu", 0, NULL, NULL, 1, in, 1, out, 0));
    const char *two[] = {"2", "0"}, *num_outputs[] = {"num_outputs", "axis"};
    in[0] = b;
    mxc_ndarray *halves[2] = {NULL, NULL};
    CK_OK(mxc_nd_zeros(&SHAPE(9), MXC_FLOAT32, mxc_cpu(), &halves[0]));
    mxc_ndarray *h0 = NULL;
    CK_OK(mxc_nd_slice(halves[0], 0, 9, &h0));
    mxc_ndarray *pair[2] = {halves[0], h0};
    mxc_ndarray *even = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(18), MXC_FLOAT32, mxc_cpu(), &even));
    mxc_ndarray *src[1] = {even};
    CK_ERR(MXC_EINVAL,
           mxc_imperative_invoke("SliceChannel", 2, num_outputs, two, 1, src, 2, pair, 0));
    ck_assert_msg(strstr(mxc_last_error(), "share memory"), "%s", mxc_last_error());
    mxc_ndarray *all[] = {a, t, b, lo, hi, halves[0], h0, even};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(all); i++)
        mxc_nd_free(all[i]);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* ---- Variadic operators at the ends of their count parameter ----------------------- */

/* Each variadic operator, the parameter that sets its number of inputs or outputs, and
 * the other parameters it needs (key, value, ..., NULL). */
static const struct {
    const char *op, *param;
    const char *other[5];
} variadic_cases[] = {
    {"Concat", "num_args", {NULL}},
    {"ElementWiseSum", "num_args", {NULL}},
    {"SliceChannel", "num_outputs", {NULL}},
    {"stack", "num_args", {NULL}},
    /* scale 1: the inputs' channels side by side */
    {"UpSampling", "num_args", {"scale", "1", "sample_type", "nearest", NULL}},
    /* a 1 x 1 crop of input 0; crop_like (input 1) gets a zero gradient */
    {"Crop", "num_args", {"h_w", "(1, 1)", NULL}},
};

/* A float32 array of `shape` holding base, base + 1, ... */
static mxc_ndarray *counting(mxc_shape shape, float base) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 1, &a));
    int64_t n = mxc_shape_size(&shape);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = base + (float)i;
    CK_OK(mxc_nd_sync_copy_from_cpu(a, v, sizeof(float) * (size_t)n));
    free(v);
    return a;
}

/* Asserts that a holds want(i) at every element i. */
static void expect_values(mxc_ndarray *a, float (*want)(int64_t i, int k, int v), int k, int v,
                          const char *what) {
    int64_t n = mxc_nd_size(a);
    float *got = malloc(sizeof(float) * (size_t)n);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want(i, k, v), "%s (v = %d, part %d): element %lld is %g, not %g",
                      what, v, k, (long long)i, (double)got[i], (double)want(i, k, v));
    free(got);
}

/* The cases below: v inputs (2, 1) holding 10 k + row, joined into (2, v) or stacked into
 * (v, 2, 1); v inputs (3) holding k + i, summed; one input (2, v) holding v row + column,
 * cut into v parts; v inputs (1, 1, 1, 1) holding k, upsampled into (1, v, 1, 1). */
static float want_concat(int64_t i, int k, int v) { return (float)(10 * (i % v) + i / v); }
static float want_stack(int64_t i, int k, int v) { return (float)(10 * (i / 2) + i % 2); }
static float want_sum(int64_t i, int k, int v) { return (float)(v * (v - 1) / 2 + v * i); }
static float want_part(int64_t i, int k, int v) { return (float)(v * i + k); }
static float want_one(int64_t i, int k, int v) { return 1; }
static float want_zero(int64_t i, int k, int v) { return 0; }
static float want_index(int64_t i, int k, int v) { return (float)i; }

/* Runs case `c` with count `v` imperatively, then bound (forward and backward with head
 * gradients of ones: every input's gradient is ones). */
static void run_variadic(int c, int v) {
    const char *op = variadic_cases[c].op;
    bool slice = strcmp(op, "SliceChannel") == 0, concat = strcmp(op, "Concat") == 0;
    bool stack = strcmp(op, "stack") == 0, up = strcmp(op, "UpSampling") == 0;
    bool crop = strcmp(op, "Crop") == 0;
    float (*want)(int64_t, int, int) = slice        ? want_part
                                       : concat     ? want_concat
                                       : stack      ? want_stack
                                       : up || crop ? want_index
                                                    : want_sum;
    char count[16];
    snprintf(count, sizeof count, "%d", v);
    const char *keys[3] = {variadic_cases[c].param}, *vals[3] = {count};
    int np = 1;
    for (const char *const *o = variadic_cases[c].other; *o; o += 2, np++)
        keys[np] = o[0], vals[np] = o[1];
    int n_in = slice ? 1 : v, n_out = slice ? v : 1;
    mxc_ndarray *in[MXC__MAX_OP_ARGS] = {NULL}, *out[MXC__MAX_OP_ARGS] = {NULL};
    for (int k = 0; k < n_in; k++)
        in[k] = slice             ? counting(SHAPE(2, v), 0)
                : concat || stack ? counting(SHAPE(2, 1), 10.0f * k)
                : up || crop      ? counting(SHAPE(1, 1, 1, 1), (float)k)
                                  : counting(SHAPE(3), (float)k);
    CK_OK(mxc_imperative_invoke(op, np, keys, vals, n_in, in, n_out, out, 0));
    for (int k = 0; k < n_out; k++) {
        expect_values(out[k], want, k, v, op);
        mxc_nd_free(out[k]);
    }

    mxc_symbol *vars[MXC__MAX_OP_ARGS], *sym = NULL;
    mxc_shape shapes[MXC__MAX_OP_ARGS];
    for (int k = 0; k < n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        CK_OK(mxc_nd_get_shape(in[k], &shapes[k]));
        CK_OK(mxc_symbol_variable(name, &vars[k]));
    }
    CK_OK(mxc_symbol_create(op, np, keys, vals, "v", n_in, NULL, vars, &sym));
    mxc_executor *x = NULL;
    mxc_ndarray *grads[MXC__MAX_OP_ARGS] = {NULL}, *heads[MXC__MAX_OP_ARGS] = {NULL};
    for (int k = 0; k < n_in; k++)
        CK_OK(mxc_nd_zeros(&shapes[k], MXC_FLOAT32, mxc_cpu(), &grads[k]));
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), n_in, in, grads, NULL, 0, NULL, &x));
    CK_OK(mxc_executor_forward(x, 1));
    int nout;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &nout, &outs));
    ck_assert_int_eq(nout, n_out);
    for (int k = 0; k < n_out; k++) {
        expect_values(outs[k], want, k, v, op);
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(outs[k], &s));
        CK_OK(mxc_nd_ones(&s, MXC_FLOAT32, mxc_cpu(), &heads[k]));
    }
    CK_OK(mxc_executor_backward(x, n_out, heads));
    for (int k = 0; k < n_in; k++)
        expect_values(grads[k], crop && k ? want_zero : want_one, k, v, "gradient");
    mxc_executor_free(x);
    for (int k = 0; k < MXC__MAX_OP_ARGS; k++) {
        mxc_nd_free(in[k]);
        mxc_nd_free(grads[k]);
        mxc_nd_free(heads[k]);
        if (k < n_in)
            mxc_symbol_free(vars[k]);
    }
    mxc_symbol_free(sym);
}

/* Every value a variadic operator's count parameter accepts runs, imperatively and bound:
 * both ends of its table's range (num_args=16 used to reach an internal assertion). Every
 * variadic operator has a case, so a new one needs one here. */
START_TEST(test_variadic_extremes) {
    size_t n;
    const char *const *ops;
    CK_OK(mxc_op_list(&n, &ops));
    for (size_t i = 0; i < n; i++) {
        /* MXNet names a variadic operator's count num_args or num_outputs */
        const struct mxc__op_def *def = mxc__op_find(ops[i]);
        bool variadic = false, listed = false;
        for (int k = 0; k < def->num_params; k++)
            variadic |= strcmp(def->params[k].name, "num_args") == 0 ||
                        strcmp(def->params[k].name, "num_outputs") == 0;
        for (size_t c = 0; c < MXC_ARRAY_SIZE(variadic_cases); c++)
            listed |= strcmp(variadic_cases[c].op, ops[i]) == 0;
        ck_assert_msg(listed || !variadic, "variadic operator %s has no case here", ops[i]);
    }
    for (int c = 0; c < (int)MXC_ARRAY_SIZE(variadic_cases); c++) {
        const struct mxc__op_def *def = mxc__op_find(variadic_cases[c].op);
        const struct mxc__param *p = NULL;
        for (int k = 0; k < def->num_params; k++)
            if (strcmp(def->params[k].name, variadic_cases[c].param) == 0)
                p = &def->params[k];
        ck_assert_ptr_nonnull(p);
        ck_assert_msg(p->min >= 1 && p->max <= MXC__MAX_OP_ARGS, "%s.%s: range [%g, %g]", def->name,
                      p->name, p->min, p->max);
        run_variadic(c, (int)p->min);
        run_variadic(c, (int)p->max);
    }
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* ---- Arrays without elements --------------------------------------------------------- */

/* An operator applied to inputs whose first axis (the batch) is 0: parameters as
 * alternating keys and values, then the named inputs' shapes; the other arguments and
 * auxiliary states are inferred. */
struct zero_case {
    const char *op;
    const char *kv[8];
    int num;
    const char *names[3];
    mxc_shape shapes[3];
};

#define UNARY(op, ...)                                  \
    {                                                   \
        op, {__VA_ARGS__}, 1, {"data"}, { SHAPE(0, 3) } \
    }
#define BINARY(op)                                                  \
    {                                                               \
        op, {NULL}, 2, {"lhs", "rhs"}, { SHAPE(0, 3), SHAPE(0, 3) } \
    }
#define BROADCAST(op)                                               \
    {                                                               \
        op, {NULL}, 2, {"lhs", "rhs"}, { SHAPE(0, 3), SHAPE(1, 3) } \
    }
#define LOSS(op)                                                       \
    {                                                                  \
        op, {NULL}, 2, {"data", "label"}, { SHAPE(0, 3), SHAPE(0, 3) } \
    }
static const struct zero_case zero_cases[] = {
    UNARY("negative"),
    UNARY("abs"),
    UNARY("sign"),
    UNARY("square"),
    UNARY("sqrt"),
    UNARY("rsqrt"),
    UNARY("exp"),
    UNARY("log"),
    UNARY("sin"),
    UNARY("cos"),
    UNARY("relu"),
    UNARY("sigmoid"),
    UNARY("tanh"),
    UNARY("smooth_l1"),
    UNARY("_plus_scalar"),
    UNARY("_minus_scalar"),
    UNARY("_rminus_scalar"),
    UNARY("_mul_scalar"),
    UNARY("_div_scalar"),
    UNARY("_rdiv_scalar"),
    UNARY("_maximum_scalar"),
    UNARY("_minimum_scalar"),
    UNARY("_power_scalar"),
    BINARY("_plus"),
    BINARY("_minus"),
    BINARY("_mul"),
    BINARY("_div"),
    BINARY("_maximum"),
    BINARY("_minimum"),
    BINARY("_power"),
    /* element-wise math, comparisons, logical (tests/check_op_math.c) */
    UNARY("log1p"),
    UNARY("expm1"),
    UNARY("floor"),
    UNARY("ceil"),
    UNARY("round"),
    UNARY("rint"),
    UNARY("trunc"),
    UNARY("fix"),
    UNARY("reciprocal"),
    UNARY("erf"),
    UNARY("softsign"),
    UNARY("cbrt"),
    UNARY("log2"),
    UNARY("log10"),
    UNARY("tan"),
    UNARY("arcsin"),
    UNARY("arccos"),
    UNARY("arctan"),
    UNARY("sinh"),
    UNARY("cosh"),
    UNARY("arcsinh"),
    UNARY("arccosh"),
    UNARY("arctanh"),
    UNARY("degrees"),
    UNARY("radians"),
    UNARY("logical_not"),
    UNARY("zeros_like"),
    UNARY("ones_like"),
    /* no inputs, and a 0 in their shape means unknown: a small array instead */
    {"_zeros", {"shape", "(2, 3)"}, 0, {NULL}, {SHAPE(1, 1)}},
    {"_ones", {"shape", "(2, 3)"}, 0, {NULL}, {SHAPE(1, 1)}},
    {"_full", {"shape", "(2, 3)", "value", "2"}, 0, {NULL}, {SHAPE(1, 1)}},
    UNARY("hard_sigmoid"),
    UNARY("_hypot_scalar"),
    UNARY("_equal_scalar"),
    UNARY("_not_equal_scalar"),
    UNARY("_greater_scalar"),
    UNARY("_greater_equal_scalar"),
    UNARY("_lesser_scalar"),
    UNARY("_lesser_equal_scalar"),
    UNARY("_logical_and_scalar"),
    UNARY("_logical_or_scalar"),
    UNARY("_logical_xor_scalar"),
    BINARY("_hypot"),
    BINARY("_equal"),
    BINARY("_not_equal"),
    BINARY("_greater"),
    BINARY("_greater_equal"),
    BINARY("_lesser"),
    BINARY("_lesser_equal"),
    BINARY("_logical_and"),
    BINARY("_logical_or"),
    BINARY("_logical_xor"),
    UNARY("FullyConnected", "num_hidden", "4"),
    {"Convolution", {"kernel", "(3, 3)", "num_filter", "2"}, 1, {"data"}, {SHAPE(0, 1, 5, 5)}},
    {"Deconvolution", {"kernel", "(3, 3)", "num_filter", "2"}, 1, {"data"}, {SHAPE(0, 1, 5, 5)}},
    {"Pooling", {"kernel", "(2, 2)", "stride", "(2, 2)"}, 1, {"data"}, {SHAPE(0, 1, 4, 4)}},
    {"Pooling",
     {"kernel", "(2, 2)", "pool_type", "avg", "global_pool", "True"},
     1,
     {"data"},
     {SHAPE(0, 1, 4, 4)}},
    UNARY("Activation", "act_type", "relu"),
    UNARY("LeakyReLU"),
    {"LeakyReLU", {"act_type", "prelu"}, 1, {"data"}, {SHAPE(0, 3, 2)}},
    {"BatchNorm", {NULL}, 1, {"data"}, {SHAPE(0, 3, 2, 2)}},
    {"BatchNorm", {"fix_gamma", "False"}, 1, {"data"}, {SHAPE(0, 3, 2, 2)}},
    UNARY("Dropout"),
    UNARY("softmax"),
    UNARY("log_softmax"),
    {"SoftmaxOutput", {NULL}, 2, {"data", "label"}, {SHAPE(0, 3), SHAPE(0)}},
    LOSS("LinearRegressionOutput"),
    LOSS("LogisticRegressionOutput"),
    LOSS("MAERegressionOutput"),
    {"Flatten", {NULL}, 1, {"data"}, {SHAPE(0, 2, 3)}},
    {"Reshape", {"shape", "(-1, 6)"}, 1, {"data"}, {SHAPE(0, 2, 3)}},
    UNARY("transpose"),
    UNARY("expand_dims", "axis", "0"),
    {"Concat", {"num_args", "2"}, 2, {"arg0", "arg1"}, {SHAPE(0, 2), SHAPE(0, 3)}},
    UNARY("SliceChannel", "num_outputs", "3"),
    {"ElementWiseSum", {"num_args", "2"}, 2, {"arg0", "arg1"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"Embedding", {"input_dim", "5", "output_dim", "3"}, 1, {"data"}, {SHAPE(0)}},
    UNARY("_copy"),
    {"squeeze", {NULL}, 1, {"data"}, {SHAPE(0, 1, 3)}},
    UNARY("SwapAxis", "dim1", "0", "dim2", "1"),
    UNARY("flip", "axis", "(0, 1)"),
    UNARY("slice", "begin", "(None, 1)", "end", "(None, None)"),
    UNARY("slice_axis", "axis", "1", "begin", "0", "end", "2"),
    {"slice_like", {NULL}, 2, {"data", "shape_like"}, {SHAPE(0, 3), SHAPE(0, 2)}},
    {"stack", {"num_args", "2"}, 2, {"arg0", "arg1"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    UNARY("tile", "reps", "(2, 2)"),
    UNARY("repeat", "repeats", "2", "axis", "0"),
    {"broadcast_to", {"shape", "(0, 3)"}, 1, {"data"}, {SHAPE(0, 1)}},
    {"broadcast_like", {NULL}, 2, {"lhs", "rhs"}, {SHAPE(0, 1), SHAPE(0, 3)}},
    UNARY("sum"),
    UNARY("mean"),
    UNARY("max"),
    UNARY("sum", "axis", "1"),
    UNARY("mean", "axis", "0"),
    UNARY("max", "axis", "1"),
    UNARY("min"),
    UNARY("min", "axis", "1"),
    UNARY("prod"),
    UNARY("prod", "axis", "1"),
    UNARY("nansum"),
    UNARY("nansum", "axis", "1"),
    UNARY("nanprod"),
    UNARY("nanprod", "axis", "1"),
    UNARY("norm"),
    UNARY("norm", "axis", "1"),
    BROADCAST("broadcast_add"),
    BROADCAST("broadcast_sub"),
    BROADCAST("broadcast_mul"),
    BROADCAST("broadcast_div"),
    BROADCAST("broadcast_maximum"),
    BROADCAST("broadcast_minimum"),
    BROADCAST("broadcast_power"),
    BROADCAST("broadcast_hypot"),
    BROADCAST("broadcast_equal"),
    BROADCAST("broadcast_not_equal"),
    BROADCAST("broadcast_greater"),
    BROADCAST("broadcast_greater_equal"),
    BROADCAST("broadcast_lesser"),
    BROADCAST("broadcast_lesser_equal"),
    BROADCAST("broadcast_logical_and"),
    BROADCAST("broadcast_logical_or"),
    BROADCAST("broadcast_logical_xor"),
    {"dot", {NULL}, 2, {"lhs", "rhs"}, {SHAPE(0, 3), SHAPE(3, 4)}},
    {"batch_dot", {NULL}, 2, {"lhs", "rhs"}, {SHAPE(0, 2, 3), SHAPE(0, 3, 4)}},
    UNARY("clip", "a_min", "-1", "a_max", "1"),
    {"sgd_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"sgd_mom_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"mp_sgd_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"mp_sgd_mom_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    UNARY("Cast", "dtype", "float32"),
    {"adam_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"nag_mom_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"rmsprop_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"rmspropalex_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"ftrl_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"signsgd_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"signum_update", {"lr", "0.1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    /* the (1) inputs (rescale_grad; r1, r2) are inferred */
    {"_adamw_update", {"lr", "0.1", "eta", "1"}, 2, {"weight", "grad"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    {"lamb_update_phase1",
     {"t", "1", "wd", "0"},
     2,
     {"weight", "grad"},
     {SHAPE(0, 3), SHAPE(0, 3)}},
    {"lamb_update_phase2", {"lr", "0.1"}, 2, {"weight", "g"}, {SHAPE(0, 3), SHAPE(0, 3)}},
    UNARY("_sleep", "seconds", "0"),
    /* indexing, selection and sorting: operator/indexing.c, sort.c */
    {"where", {NULL}, 3, {"condition", "x", "y"}, {SHAPE(0, 3), SHAPE(0, 3), SHAPE(0, 3)}},
    {"take", {"axis", "1"}, 2, {"a", "indices"}, {SHAPE(0, 3), SHAPE(4)}},
    {"pick", {NULL}, 2, {"data", "index"}, {SHAPE(0, 3), SHAPE(0)}},
    {"one_hot", {"depth", "3"}, 1, {"indices"}, {SHAPE(0)}},
    UNARY("argmax", "axis", "1"),
    UNARY("argmin", "axis", "-1", "keepdims", "True"),
    UNARY("argmax_channel"),
    UNARY("topk", "k", "2", "ret_typ", "both"),
    UNARY("topk", "ret_typ", "mask"),
    UNARY("sort"),
    UNARY("argsort", "axis", "0"),
    {"gather_nd", {NULL}, 2, {"data", "indices"}, {SHAPE(4, 3), SHAPE(1, 0)}},
    UNARY("LayerNorm"),
    {"InstanceNorm", {NULL}, 1, {"data"}, {SHAPE(0, 3, 2)}},
    {"GroupNorm", {"num_groups", "2"}, 1, {"data"}, {SHAPE(0, 4, 2)}},
    {"LRN", {"nsize", "3"}, 1, {"data"}, {SHAPE(0, 4, 2, 2)}},
    UNARY("SoftmaxActivation"),
    UNARY("L2Normalization"),
    {"L2Normalization", {"mode", "spatial"}, 1, {"data"}, {SHAPE(0, 3, 2)}},
    {"UpSampling",
     {"scale", "2", "sample_type", "nearest", "num_args", "2"},
     2,
     {"arg0", "arg1"},
     {SHAPE(0, 2, 2, 2), SHAPE(0, 1, 1, 1)}},
    {"UpSampling",
     {"scale", "2", "sample_type", "bilinear", "num_filter", "2", "num_args", "1"},
     1,
     {"data"},
     {SHAPE(0, 2, 3, 3)}},
    {"Pad", {"pad_width", "(0, 0, 0, 0, 1, 1, 2, 0)"}, 1, {"data"}, {SHAPE(0, 2, 3, 3)}},
    {"Pad",
     {"mode", "edge", "pad_width", "(0, 0, 0, 0, 1, 1, 2, 0, 1, 1)"},
     1,
     {"data"},
     {SHAPE(0, 1, 2, 3, 3)}},
    {"SoftmaxActivation", {"mode", "channel"}, 1, {"data"}, {SHAPE(0, 3, 2)}},
    /* sequences (batch first: axis 1) and Crop */
    {"SequenceMask", {"use_sequence_length", "True", "axis", "1"}, 1, {"data"}, {SHAPE(0, 3, 2)}},
    {"SequenceLast", {"use_sequence_length", "True", "axis", "1"}, 1, {"data"}, {SHAPE(0, 3)}},
    {"SequenceReverse", {"use_sequence_length", "True"}, 1, {"data"}, {SHAPE(3, 0, 2)}},
    {"Crop", {"num_args", "1", "h_w", "(1, 2)"}, 1, {"arg0"}, {SHAPE(0, 2, 3, 3)}},
    /* RNN's first axis is time: a sequence of 0 steps (operator/rnn.c) */
    {"RNN",
     {"state_size", "2", "num_layers", "2", "mode", "lstm", "state_outputs", "True"},
     1,
     {"data"},
     {SHAPE(0, 3, 2)}},
    {"RNN",
     {"state_size", "2", "num_layers", "1", "mode", "gru", "bidirectional", "True"},
     1,
     {"data"},
     {SHAPE(0, 3, 2)}},
};

/* Which arguments want a gradient: all, the first only, all but the first (as data in
 * training). Kernels must leave the others alone: they have no data. */
enum grad_set { ALL_GRADS, FIRST_GRAD, NOT_FIRST_GRAD };

/* Binds case `c` with its batch axis set to `batch` (0, or 2 for comparison) and
 * gradients for `grads`, and runs forward (training) and, for differentiable operators,
 * backward; all must succeed. */
static void run_zero_case(const struct zero_case *c, int64_t batch, enum grad_set wanted) {
    int np = 0;
    while (np < 8 && c->kv[np])
        np++;
    const char *keys[4], *vals[4];
    for (int k = 0; k < np / 2; k++) {
        keys[k] = c->kv[2 * k];
        vals[k] = c->kv[2 * k + 1];
    }
    mxc_symbol *sym = NULL;
    CK_OK(mxc_symbol_create(c->op, np / 2, keys, vals, "z", 0, NULL, NULL, &sym));
    int na, nx, unknown;
    const char *const *names;
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nx, &names));
    char var_names[3][32]; /* the node is "z": its inputs are the variables z_<name> */
    const char *given[3];
    mxc_shape shapes[3];
    for (int k = 0; k < c->num; k++) {
        snprintf(var_names[k], sizeof var_names[k], "z_%s", c->names[k]);
        given[k] = var_names[k];
        shapes[k] = c->shapes[k];
        if (shapes[k].dims[0] == 0)
            shapes[k].dims[0] = batch;
    }
    mxc_shape arg_s[8], aux_s[4];
    CK_OK(mxc_symbol_infer_shape(sym, c->num, given, shapes, arg_s, NULL, aux_s, &unknown, NULL));
    ck_assert_int_eq(unknown, 0);
    mxc_ndarray *args[8] = {NULL}, *grads[8] = {NULL}, *aux[4] = {NULL};
    int reqs[8];
    bool any = false;
    for (int i = 0; i < na; i++) {
        CK_OK(mxc_nd_ones(&arg_s[i], MXC_FLOAT32, mxc_cpu(), &args[i]));
        CK_OK(mxc_nd_zeros(&arg_s[i], MXC_FLOAT32, mxc_cpu(), &grads[i]));
        bool want = wanted == ALL_GRADS || (wanted == FIRST_GRAD) == (i == 0);
        reqs[i] = want ? MXC_GRAD_WRITE : MXC_GRAD_NULL;
        any |= want;
    }
    for (int i = 0; i < nx; i++)
        CK_OK(mxc_nd_ones(&aux_s[i], MXC_FLOAT32, mxc_cpu(), &aux[i]));
    mxc_op_info info;
    CK_OK(mxc_op_get_info(mxc__op_find(c->op)->name, &info));
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), na, args, info.differentiable ? grads : NULL,
                            info.differentiable ? reqs : NULL, nx, aux, &x));
    CK_OK(mxc_executor_forward(x, 1));
    int nout;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &nout, &outs));
    mxc_ndarray *heads[MXC__MAX_OP_ARGS] = {NULL};
    for (int k = 0; k < nout; k++) {
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(outs[k], &s));
        CK_OK(mxc_nd_ones(&s, MXC_FLOAT32, mxc_cpu(), &heads[k]));
    }
    if (info.differentiable && any)
        CK_OK(mxc_executor_backward(x, nout, heads));
    CK_OK(mxc_nd_wait_all());
    mxc_executor_free(x);
    for (int k = 0; k < MXC__MAX_OP_ARGS; k++)
        mxc_nd_free(heads[k]);
    for (int i = 0; i < 8; i++) {
        mxc_nd_free(args[i]);
        mxc_nd_free(grads[i]);
    }
    for (int i = 0; i < 4; i++)
        mxc_nd_free(aux[i]);
    mxc_symbol_free(sym);
}

/* Every operator on batch-0 inputs, and on batch 2 for comparison, with every set of
 * wanted gradients. The UBSan builds (GCC's in the address build, clang's) fail the test
 * on any pointer arithmetic on NULL or memset / memcpy of NULL. Every operator has a
 * case. */
START_TEST(test_zero_size_every_operator) {
    for (int batch = 0; batch <= 2; batch += 2)
        for (int g = ALL_GRADS; g <= NOT_FIRST_GRAD; g++)
            run_zero_case(&zero_cases[_i], batch, g);
}
END_TEST

START_TEST(test_zero_size_cases_cover_every_operator) {
    size_t n;
    const char *const *ops;
    CK_OK(mxc_op_list(&n, &ops));
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t c = 0; c < MXC_ARRAY_SIZE(zero_cases) && !found; c++)
            found = strcmp(zero_cases[c].op, ops[i]) == 0;
        ck_assert_msg(found, "operator %s has no zero-size case", ops[i]);
    }
}
END_TEST

/* A 0 on an inner axis, imperatively: the results of sums and products over nothing. */
START_TEST(test_zero_size_inner_axis) {
    mxc_ndarray *e = NULL, *w = NULL, *out = NULL;
    float got[8];
    CK_OK(mxc_nd_zeros(&SHAPE(2, 0), MXC_FLOAT32, mxc_cpu(), &e));
    const char *ax[] = {"axis"}, *one[] = {"1"};
    CK_OK(mxc_imperative_invoke("sum", 1, ax, one, 1, &e, 1, &out, 0));
    CK_OK(mxc_nd_sync_copy_to_cpu(out, got, 2 * sizeof(float)));
    ck_assert(got[0] == 0 && got[1] == 0);
    mxc_nd_free(out);
    out = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(0, 4), MXC_FLOAT32, mxc_cpu(), &w));
    mxc_ndarray *ew[] = {e, w};
    CK_OK(mxc_imperative_invoke("dot", 0, NULL, NULL, 2, ew, 1, &out, 0));
    CK_OK(mxc_nd_sync_copy_to_cpu(out, got, 8 * sizeof(float)));
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(got[i], 0);
    mxc_nd_free(out);
    out = NULL;
    const char *sk[] = {"shape"}, *sv[] = {"(-1, 0)"};
    int rc = mxc_imperative_invoke("Reshape", 1, sk, sv, 1, &e, 1, &out, 0);
    ck_assert_msg(rc == MXC_OK || (rc == MXC_EINVAL || rc == MXC_ESHAPE), "%s", mxc_last_error());
    mxc_nd_free(out);
    out = NULL;
    const char *un[] = {"relu", "softmax", "log_softmax", "mean", "max", "sum"};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(un); i++) {
        CK_OK(mxc_imperative_invoke(un[i], 0, NULL, NULL, 1, &e, 1, &out, 1));
        mxc_nd_free(out);
        out = NULL;
    }
    CK_OK(mxc_nd_wait_all());
    mxc_nd_free(e);
    mxc_nd_free(w);
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

/* In a CUDA build every operator has a GPU forward, and a GPU backward when it has a CPU
 * one (the backend comparison in tests/util/op_check.c only records what is missing; this
 * test fails for it). Without CUDA no operator has a GPU kernel (MXC__GPU is NULL). */
START_TEST(test_registry_gpu_kernels) {
    size_t n;
    const char *const *names;
    ck_assert_int_eq(mxc_op_list(&n, &names), MXC_OK);
    char missing[4096] = "";
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct mxc__op_def *def = mxc__op_find(names[i]);
        ck_assert_ptr_nonnull(def);
#ifdef MXC_USE_CUDA
        const char *what = def->forward_gpu == NULL                          ? "forward"
                           : def->backward_cpu != NULL && !def->backward_gpu ? "backward"
                                                                             : NULL;
        if (what == NULL)
            continue;
        count++;
        size_t len = strlen(missing);
        if (len < sizeof missing)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s (%s)",
                                    len ? ", " : "", names[i], what);
#else
        ck_assert_msg(def->forward_gpu == NULL && def->backward_gpu == NULL,
                      "%s has a GPU kernel in a build without CUDA", names[i]);
#endif
    }
    ck_assert_msg(count == 0, "%d operator(s) lack GPU kernels: %s", count, missing);
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
    tcase_add_test(tc, test_registry_gpu_kernels);
    suite_add_tcase(s, tc);

    tc = tcase_create("elemwise");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_elemwise_values, 0, (int)MXC_ARRAY_SIZE(ew_cases));
    tcase_add_loop_test(tc, test_elemwise_gradients, 0, (int)MXC_ARRAY_SIZE(ew_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("inplace");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_inplace_every_operator);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_invoke);
    tcase_add_test(tc, test_invoke_output_sharing_an_input);
    tcase_add_test(tc, test_variadic_extremes);
    suite_add_tcase(s, tc);

    tc = tcase_create("zero_size");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_zero_size_every_operator, 0, (int)MXC_ARRAY_SIZE(zero_cases));
    tcase_add_test(tc, test_zero_size_cases_cover_every_operator);
    tcase_add_test(tc, test_zero_size_inner_axis);
    tcase_add_loop_test(tc, test_invoke_empty, 0, (int)MXC_ARRAY_SIZE(empty_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(operator_suite()); }
