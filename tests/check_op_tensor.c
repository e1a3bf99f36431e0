/*
 * tests/check_op_tensor.c — MXNet's aliases of operator names (resolved by the registry)
 * and the tensor-manipulation family: _copy, squeeze, SwapAxis, flip, slice, slice_axis,
 * slice_like, stack, tile, repeat, broadcast_to and broadcast_like. Output shapes, forward
 * values and input gradients against MXNet 1.9.1 (tests/data/ops/tensor, made by
 * scripts/gen_op_refs_tensor.py), each run also in place where the operator allows it and on
 * gpu(0) against the CPU when there is one (the harness, tests/util/op_check.h);
 * finite-difference gradients with write and add-to requests; bad parameters and shapes as
 * errors naming the values; empty slices; one run of each through mxc_imperative_invoke
 * under its MXNet alias.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Aliases ------------------------------------------------------------------------ */

/* MXNet 1.9.1's aliases (grouped by NNGetOpHandle) and the operator each names. */
static const char *const aliases[][2] = {
    {"add_n", "ElementWiseSum"},
    {"concat", "Concat"},
    {"flatten", "Flatten"},
    {"reshape", "Reshape"},
    {"split", "SliceChannel"},
    {"broadcast_plus", "broadcast_add"},
    {"broadcast_minus", "broadcast_sub"},
    {"sum_axis", "sum"},
    {"max_axis", "max"},
    {"elemwise_add", "_plus"},
    {"_Mul", "_mul"},
    {"_RDivScalar", "_rdiv_scalar"},
    {"Softmax", "SoftmaxOutput"},
    {"identity", "_copy"},
    {"swapaxes", "SwapAxis"},
    {"reverse", "flip"},
    {"crop", "slice"},
};

/* Each alias finds its operator's one definition, through the internal lookup and the
 * public introspection, which reports the registered name; mxc_op_list lists only
 * registered names. */
START_TEST(test_alias_lookup) {
    const char *alias = aliases[_i][0], *name = aliases[_i][1];
    const struct mxc__op_def *def = mxc__op_find(name);
    ck_assert_msg(def != NULL, "%s is not registered", name);
    ck_assert_ptr_eq(mxc__op_find(alias), def);
    const struct mxc__op_def *looked = NULL;
    CK_OK(mxc__op_lookup(alias, &looked));
    ck_assert_ptr_eq(looked, def);
    mxc_op_info info;
    CK_OK(mxc_op_get_info(alias, &info));
    ck_assert_str_eq(info.name, name);
    ck_assert_int_eq(mxc_op_supports(alias, mxc_cpu(), MXC_FLOAT32), 1);
    size_t n;
    const char *const *names;
    CK_OK(mxc_op_list(&n, &names));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strcmp(names[i], alias) != 0, "alias %s is listed as an operator", alias);
}
END_TEST

/* An unknown name is still an error, and a near miss of an alias is not taken for it. */
START_TEST(test_alias_unknown) {
    const struct mxc__op_def *def = (const struct mxc__op_def *)1;
    CK_ERR_HAS(mxc__op_lookup("add_m", &def), MXC_EINVAL, "unknown operator", "add_m");
    ck_assert_ptr_null(def);
    ck_assert_ptr_null(mxc__op_find("Add_n"));
    ck_assert_ptr_null(mxc__op_find("add_n "));
}
END_TEST

/* mxc_imperative_invoke under an alias runs the operator: add_n of two arrays. */
START_TEST(test_alias_invoke) {
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    struct mxct_tensor ta = mxct_tensor_from(SHAPE(2, 2), a), tb = mxct_tensor_from(SHAPE(2, 2), b);
    mxc_ndarray *in[2] = {mxct_array_of(&ta), mxct_array_of(&tb)}, *out[1] = {NULL};
    const char *keys[] = {"num_args"}, *vals[] = {"2"};
    CK_OK(mxc_imperative_invoke("add_n", 1, keys, vals, 2, in, 1, out, 0));
    float got[4];
    CK_OK(mxc_nd_sync_copy_to_cpu(out[0], got, sizeof got));
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(got[i], a[i] + b[i]);
    mxc_nd_free(out[0]);
    mxc_nd_free(in[0]);
    mxc_nd_free(in[1]);
    mxct_tensors_free(&ta, 1);
    mxct_tensors_free(&tb, 1);
}
END_TEST

/* A symbol JSON written with aliases (mx.sym.add_n, mx.sym.concat, mx.sym.flatten) loads,
 * binds and runs: out = flatten(concat(add_n(a, b, a), b, dim=1)) on (2, 1, 2) arrays. */
static const char *const alias_json =
    "{\"nodes\": [\n"
    "  {\"op\": \"null\", \"name\": \"a\", \"inputs\": []},\n"
    "  {\"op\": \"null\", \"name\": \"b\", \"inputs\": []},\n"
    "  {\"op\": \"add_n\", \"name\": \"s\", \"attrs\": {\"num_args\": \"3\"},\n"
    "   \"inputs\": [[0, 0, 0], [1, 0, 0], [0, 0, 0]]},\n"
    "  {\"op\": \"concat\", \"name\": \"c\", \"attrs\": {\"num_args\": \"2\", \"dim\": \"1\"},\n"
    "   \"inputs\": [[2, 0, 0], [1, 0, 0]]},\n"
    "  {\"op\": \"flatten\", \"name\": \"f\", \"inputs\": [[3, 0, 0]]}],\n"
    " \"arg_nodes\": [0, 1], \"node_row_ptr\": [0, 1, 2, 3, 4, 5],\n"
    " \"heads\": [[4, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

START_TEST(test_alias_symbol_json) {
    mxc_symbol *sym;
    CK_OK(mxc_symbol_load_json(alias_json, &sym));
    const char *names[] = {"a", "b"};
    mxc_shape shapes[] = {SHAPE(2, 1, 2), SHAPE(2, 1, 2)};
    mxc_executor *x;
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 2, names, shapes, MXC_GRAD_NULL, &x));
    int nargs;
    mxc_ndarray *const *args;
    CK_OK(mxc_executor_arrays(x, &nargs, &args, NULL, NULL, NULL));
    ck_assert_int_eq(nargs, 2);
    const float a[4] = {1, 2, 3, 4}, b[4] = {-1, 0.5f, 2, 8};
    CK_OK(mxc_nd_sync_copy_from_cpu(args[0], a, sizeof a));
    CK_OK(mxc_nd_sync_copy_from_cpu(args[1], b, sizeof b));
    CK_OK(mxc_executor_forward(x, 0));
    int nout;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &nout, &outs));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(outs[0], &s));
    ck_assert_int_eq(s.ndim, 2);
    ck_assert_int_eq(s.dims[0], 2);
    ck_assert_int_eq(s.dims[1], 4);
    float got[8];
    CK_OK(mxc_nd_sync_copy_to_cpu(outs[0], got, sizeof got));
    /* row n: 2a[n] + b[n] (2 values), then b[n] */
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++) {
            ck_assert_float_eq(got[4 * r + k], 2 * a[2 * r + k] + b[2 * r + k]);
            ck_assert_float_eq(got[4 * r + 2 + k], b[2 * r + k]);
        }
    /* saved back under the registered names */
    const char *json;
    CK_OK(mxc_symbol_save_json(sym, &json));
    ck_assert_ptr_nonnull(strstr(json, "\"ElementWiseSum\""));
    ck_assert_ptr_null(strstr(json, "\"add_n\""));
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Reference cases (parameters as in scripts/gen_op_refs_tensor.py) ----------------- */

#define MAX_IN 3

struct ref_case {
    const char *file; /* tests/data/ops/tensor/<file>.params */
    const char *op;
    int num_in;
    const char *kv[8];
};

static const struct ref_case ref_cases[] = {
    {"copy", "_copy", 1, {NULL}},
    {"squeeze_all", "squeeze", 1, {NULL}},
    {"squeeze_axis", "squeeze", 1, {"axis", "(0,)"}},
    {"squeeze_neg", "squeeze", 1, {"axis", "(-2, 0)"}},
    {"squeeze_to_one", "squeeze", 1, {NULL}},
    {"swapaxis", "SwapAxis", 1, {"dim1", "0", "dim2", "2"}},
    {"swapaxis_neg", "SwapAxis", 1, {"dim1", "-1", "dim2", "1"}},
    {"swapaxis_same", "SwapAxis", 1, {NULL}},
    {"flip_0", "flip", 1, {"axis", "(0,)"}},
    {"flip_02", "flip", 1, {"axis", "(0, 2)"}},
    {"flip_twice", "flip", 1, {"axis", "(1, 1)"}},
    {"slice_plain", "slice", 1, {"begin", "(0, 1)", "end", "(2, 3)"}},
    {"slice_none", "slice", 1, {"begin", "(None, 1, None)", "end", "(None, None, 2)"}},
    {"slice_neg", "slice", 1, {"begin", "(-1, -3)", "end", "(None, -1)"}},
    {"slice_step",
     "slice",
     1,
     {"begin", "(None, None, 1)", "end", "(None, None, None)", "step", "(1, 2, 2)"}},
    {"slice_step_neg",
     "slice",
     1,
     {"begin", "(None, -1)", "end", "(None, 0)", "step", "(None, -2)"}},
    {"slice_reverse_all",
     "slice",
     1,
     {"begin", "(None, None, None)", "end", "(None, None, None)", "step", "(-1, -2, -3)"}},
    {"slice_clamp", "slice", 1, {"begin", "(0, -5)", "end", "(2, 10)"}},
    {"slice_clamp_neg", "slice", 1, {"begin", "(None, 7)", "end", "(None, -9)", "step", "(1, -1)"}},
    {"slice_axis_end_none", "slice_axis", 1, {"axis", "1", "begin", "1", "end", "None"}},
    {"slice_axis_neg", "slice_axis", 1, {"axis", "-1", "begin", "-3", "end", "-1"}},
    {"slice_axis_0", "slice_axis", 1, {"axis", "0", "begin", "0", "end", "1"}},
    {"slice_like_all", "slice_like", 2, {NULL}},
    {"slice_like_axes", "slice_like", 2, {"axes", "(0, 2)"}},
    {"slice_like_neg", "slice_like", 2, {"axes", "(-1,)"}},
    {"stack_0", "stack", 2, {"num_args", "2"}},
    {"stack_last", "stack", 3, {"num_args", "3", "axis", "-1"}},
    {"stack_mid", "stack", 2, {"num_args", "2", "axis", "1"}},
    {"tile_last", "tile", 1, {"reps", "(2,)"}},
    {"tile_pad_data", "tile", 1, {"reps", "(2, 1, 3)"}},
    {"tile_pad_reps", "tile", 1, {"reps", "(3,)"}},
    {"tile_both", "tile", 1, {"reps", "(2, 3)"}},
    {"tile_none", "tile", 1, {"reps", "()"}},
    {"repeat_flat", "repeat", 1, {"repeats", "2"}},
    {"repeat_axis", "repeat", 1, {"repeats", "3", "axis", "1"}},
    {"repeat_neg", "repeat", 1, {"repeats", "2", "axis", "-1"}},
    {"broadcast_to_keep", "broadcast_to", 1, {"shape", "(2, 0, 4)"}},
    {"broadcast_to_last", "broadcast_to", 1, {"shape", "(3, 5)"}},
    {"broadcast_to_all", "broadcast_to", 1, {"shape", "(4, 5)"}},
    {"broadcast_like_all", "broadcast_like", 2, {NULL}},
    {"broadcast_like_axes", "broadcast_like", 2, {"lhs_axes", "(0, 2)", "rhs_axes", "(1, 0)"}},
    {"broadcast_like_neg", "broadcast_like", 2, {"lhs_axes", "(-1,)", "rhs_axes", "(-2,)"}},
};

/* The output's shape and values (exact: elements are moved, or summed in the same order
 * for the copies' gradients within float rounding), then every input's gradient for
 * MXNet's head gradient; the harness also runs both in place where declared, and on gpu(0)
 * against the CPU. */
START_TEST(test_reference) {
    const struct ref_case *c = &ref_cases[_i];
    struct mxct_ref_case r = mxct_ref_case_of("tensor", c->file, c->op, c->kv, c->num_in, 1);
    mxct_ref_expect_forward(&r, false, 0, 0);
    mxct_ref_expect_backward(&r, 1e-6, 1e-6);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in;
    mxc_shape shapes[MAX_IN];
    const char *kv[8];
};

static const struct grad_case grad_cases[] = {
    {"_copy", 1, {SHAPE(3, 4)}, {NULL}},
    {"squeeze", 1, {SHAPE(2, 1, 3)}, {NULL}},
    {"SwapAxis", 1, {SHAPE(2, 3, 2, 2)}, {"dim1", "1", "dim2", "3"}},
    {"flip", 1, {SHAPE(3, 2, 4)}, {"axis", "(0, 2)"}},
    {"slice",
     1,
     {SHAPE(4, 5, 3)},
     {"begin", "(1, None, -1)", "end", "(3, 0, None)", "step", "(1, -2, 1)"}},
    {"slice_axis", 1, {SHAPE(3, 5)}, {"axis", "1", "begin", "1", "end", "-1"}},
    {"slice_like", 2, {SHAPE(3, 4), SHAPE(2, 2)}, {"axes", "(0,)"}},
    {"stack", 3, {SHAPE(2, 3), SHAPE(2, 3), SHAPE(2, 3)}, {"num_args", "3", "axis", "1"}},
    {"tile", 1, {SHAPE(2, 3)}, {"reps", "(2, 1, 2)"}},
    {"repeat", 1, {SHAPE(2, 3)}, {"repeats", "3", "axis", "0"}},
    {"repeat", 1, {SHAPE(2, 3)}, {"repeats", "2"}},
    {"broadcast_to", 1, {SHAPE(1, 3, 1)}, {"shape", "(2, 3, 4)"}},
    {"broadcast_like", 2, {SHAPE(3, 1), SHAPE(3, 4)}, {NULL}},
};

/* The shape-only inputs (slice_like's shape_like, broadcast_like's rhs) have gradient 0:
 * also checked by finite differences, since the output does not depend on their values. */
START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    struct mxct_params kv = mxct_params_from_pairs(c->kv);
    struct mxct_tensor in[MAX_IN];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], -1, 1, 20u + (unsigned)i);
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Through the engine, under MXNet's aliases ---------------------------------------- */

/* MXNet's other name for `op`, or `op` itself. */
static const char *alias_of(const char *op) {
    for (size_t i = 0; i < MXC_ARRAY_SIZE(aliases); i++)
        if (strcmp(aliases[i][1], op) == 0)
            return aliases[i][0];
    return op;
}

/* Every reference case through mxc_imperative_invoke (an engine push, output allocated from
 * the inferred shape), called by its alias where MXNet has one. */
START_TEST(test_invoke) {
    const struct ref_case *c = &ref_cases[_i];
    struct mxct_ref_case r = mxct_ref_case_of("tensor", c->file, c->op, c->kv, c->num_in, 1);
    mxct_ref_expect_invoke(&r, alias_of(c->op), false, 0, 0);
}
END_TEST

/* ---- Bad parameters and shapes ------------------------------------------------------- */

/* `op` with `kv` on zero arrays of the given shapes fails with `code`, the message holding
 * each needle, and no output is made. */
static void expect_invoke_error(const char *op, struct mxct_params kv, int num_in,
                                const mxc_shape *shapes, int code, const char *const *needles) {
    mxc_ndarray *in[MAX_IN], *out[1] = {NULL};
    for (int i = 0; i < num_in; i++)
        CK_OK(mxc_nd_zeros(&shapes[i], MXC_FLOAT32, mxc_cpu(), &in[i]));
    mxc_clear_error();
    int rc = mxc_imperative_invoke(op, kv.num, kv.keys, kv.vals, num_in, in, 1, out, 0);
    mxct_expect_error(rc, code, needles);
    ck_assert_ptr_null(out[0]);
    for (int i = 0; i < num_in; i++)
        mxc_nd_free(in[i]);
}

#define BAD1(op, shape, code, kv, ...) \
    expect_invoke_error(op, kv, 1, &shape, code, (const char *const[]){__VA_ARGS__, NULL})
#define BAD2(op, s0, s1, code, kv, ...)                               \
    expect_invoke_error(op, kv, 2, (const mxc_shape[]){s0, s1}, code, \
                        (const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_bad_squeeze_swap_flip) {
    mxc_shape x = SHAPE(1, 3, 1);
    BAD1("squeeze", x, MXC_EINVAL, MXCT_KV("axis", "(1,)"), "squeeze", "axis=(1)", "(1, 3, 1)");
    BAD1("squeeze", x, MXC_EINVAL, MXCT_KV("axis", "(0, -3)"), "squeeze", "not a distinct");
    BAD1("squeeze", x, MXC_EINVAL, MXCT_KV("axis", "(3,)"), "squeeze", "axis=(3)");
    BAD1("squeeze", x, MXC_EINVAL, MXCT_KV("axis", "(None,)"), "squeeze");
    BAD1("squeeze", x, MXC_EINVAL, MXCT_KV("axis", "(0, x)"), "squeeze", "axis", "None");
    mxc_shape y = SHAPE(2, 3, 4);
    BAD1("SwapAxis", y, MXC_EINVAL, MXCT_KV("dim1", "3"), "SwapAxis", "dim1=3", "3-D");
    BAD1("SwapAxis", y, MXC_EINVAL, MXCT_KV("dim2", "-4"), "SwapAxis", "dim2=-4");
    BAD1("SwapAxis", y, MXC_EINVAL, MXCT_KV("axis", "1"), "SwapAxis", "dim1, dim2");
    /* MXNet 1.9.1's flip takes no negative axes */
    BAD1("flip", y, MXC_EINVAL, MXCT_KV("axis", "(-1,)"), "flip", "-1", "(2, 3, 4)");
    BAD1("flip", y, MXC_EINVAL, MXCT_KV("axis", "(0, 3)"), "flip", "(0, 3)", "[0, 3)");
    BAD1("flip", y, MXC_EINVAL, MXCT_NO_PARAMS, "flip", "required", "axis");
}
END_TEST

START_TEST(test_bad_slices) {
    mxc_shape x = SHAPE(2, 3, 4);
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(0,)", "end", "(1, 2)"), "slice",
         "begin has 1 entries, end 2", "(2, 3, 4)");
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(0, 0, 0, 0)", "end", "(1, 1, 1, 1)"),
         "begin has 4 entries");
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(1,)", "end", "(2,)", "step", "(1, 1)"),
         "step 2");
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(None,)", "end", "(None,)", "step", "(0,)"),
         "slice", "step[0] is 0");
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(0,)"), "slice", "required", "end");
    BAD1("slice", x, MXC_EINVAL, MXCT_KV("begin", "(1, x)", "end", "(2, 2)"), "slice", "begin",
         "(1, x)");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "3", "begin", "0", "end", "1"), "slice_axis",
         "axis=3", "(2, 3, 4)");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "2", "end", "1"), "slice_axis",
         "begin=2, end=1", "axis 1");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "0", "end", "4"), "end=4");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "-4", "end", "None"),
         "begin=-4", "None = 3");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "1", "end", "1"), "end=1");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "1"), "required", "end");
    BAD1("slice_axis", x, MXC_EINVAL, MXCT_KV("axis", "1", "begin", "1", "end", "x"), "end",
         "integer or None");
    BAD2("slice_like", x, SHAPE(1, 2), MXC_ESHAPE, MXCT_NO_PARAMS, "slice_like", "(2, 3, 4)",
         "(1, 2)", "same number of axes");
    BAD2("slice_like", x, SHAPE(1, 2, 5), MXC_ESHAPE, MXCT_NO_PARAMS, "slice_like", "larger",
         "axis 2");
    BAD2("slice_like", x, SHAPE(1, 2), MXC_EINVAL, MXCT_KV("axes", "(-1,)"), "slice_like",
         "axis -1");
    BAD2("slice_like", x, SHAPE(7), MXC_ESHAPE, MXCT_KV("axes", "(0,)"), "larger", "axis 0");
}
END_TEST

START_TEST(test_bad_stack_tile_repeat) {
    BAD2("stack", SHAPE(2, 3, 4), SHAPE(2, 3, 5), MXC_ESHAPE, MXCT_KV("num_args", "2"), "stack",
         "arg1", "(2, 3, 5)", "(2, 3, 4)");
    BAD2("stack", SHAPE(2, 3), SHAPE(2, 3), MXC_EINVAL, MXCT_KV("num_args", "2", "axis", "3"),
         "stack", "axis=3", "[-3, 2]");
    BAD2("stack", SHAPE(2, 3), SHAPE(2, 3), MXC_EINVAL, MXCT_NO_PARAMS, "stack", "num_args");
    BAD2("stack", SHAPE(2, 3), SHAPE(2, 3), MXC_EINVAL, MXCT_KV("num_args", "17"), "num_args",
         "16");
    mxc_shape eight = SHAPE(1, 1, 1, 1, 1, 1, 1, 2);
    BAD2("stack", eight, eight, MXC_ENOTSUP, MXCT_KV("num_args", "2"), "stack", "most");
    mxc_shape x = SHAPE(2, 3);
    BAD1("tile", x, MXC_EINVAL, MXCT_KV("reps", "(0,)"), "tile", "reps=(0)", ">= 1");
    BAD1("tile", x, MXC_EINVAL, MXCT_KV("reps", "(2, -1)"), "tile", "(2, -1)");
    BAD1("tile", x, MXC_EINVAL, MXCT_NO_PARAMS, "tile", "required", "reps");
    BAD1("tile", x, MXC_ESHAPE, MXCT_KV("reps", "(4611686018427387904, 4)"), "tile", "int64");
    BAD1("repeat", x, MXC_EINVAL, MXCT_KV("repeats", "-1"), "repeat", "repeats=-1");
    BAD1("repeat", x, MXC_EINVAL, MXCT_KV("repeats", "2", "axis", "2"), "repeat", "axis=2",
         "(2, 3)");
    BAD1("repeat", x, MXC_EINVAL, MXCT_KV("axis", "0"), "repeat", "required", "repeats");
    /* an output beyond int64, from shape inference alone (no array that large is made) */
    const struct mxc__op_def *def = mxc__op_find("repeat");
    _Alignas(16) unsigned char params[64];
    struct mxct_params kv = MXCT_KV("repeats", "2147483647");
    CK_OK(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params));
    mxc_shape big = SHAPE(1 << 30, 1 << 30), out = {0};
    CK_ERR_HAS(def->infer_shape(params, &big, 1, &out, 1, NULL, 0), MXC_ESHAPE, "repeat", "int64");
    ck_assert_int_eq(out.ndim, 0);
}
END_TEST

START_TEST(test_bad_broadcasts) {
    mxc_shape x = SHAPE(1, 3, 1);
    BAD1("broadcast_to", x, MXC_ESHAPE, MXCT_KV("shape", "(2, 4, 4)"), "broadcast_to", "(1, 3, 1)",
         "(2, 4, 4)", "axis 1");
    BAD1("broadcast_to", x, MXC_EINVAL, MXCT_KV("shape", "(2, 3)"), "broadcast_to", "(2, 3)",
         "one entry per axis");
    BAD1("broadcast_to", x, MXC_EINVAL, MXCT_KV("shape", "(2, -1, 4)"), "negative");
    BAD1("broadcast_to", x, MXC_EINVAL, MXCT_NO_PARAMS, "broadcast_to", "shape=()");
    BAD2("broadcast_like", x, SHAPE(2, 3), MXC_ESHAPE, MXCT_NO_PARAMS, "broadcast_like",
         "same number of axes");
    BAD2("broadcast_like", x, SHAPE(2, 5, 4), MXC_ESHAPE, MXCT_NO_PARAMS, "broadcast_like",
         "(2, 5, 4)", "axis 1");
    BAD2("broadcast_like", x, SHAPE(7, 5), MXC_EINVAL, MXCT_KV("lhs_axes", "(0,)"),
         "broadcast_like", "both None");
    BAD2("broadcast_like", x, SHAPE(7, 5), MXC_EINVAL,
         MXCT_KV("lhs_axes", "(0,)", "rhs_axes", "(0, 1)"), "same non-zero length");
    BAD2("broadcast_like", x, SHAPE(7, 5), MXC_EINVAL, MXCT_KV("lhs_axes", "()", "rhs_axes", "()"),
         "same non-zero length");
    BAD2("broadcast_like", x, SHAPE(7, 5), MXC_EINVAL,
         MXCT_KV("lhs_axes", "(3,)", "rhs_axes", "(0,)"), "lhs_axes[0]=3");
    BAD2("broadcast_like", x, SHAPE(7, 5), MXC_ESHAPE,
         MXCT_KV("lhs_axes", "(1,)", "rhs_axes", "(0,)"), "(1, 3, 1)", "(1, 7, 1)");
}
END_TEST

/* ---- Empty windows and parameters printed back ---------------------------------------- */

/* A slice that holds nothing (begin past end, clamped, or a negative step the wrong way):
 * an output with a 0 axis, and a gradient of zeros, written or added. */
START_TEST(test_empty_slices) {
    static const char *const specs[][6] = {
        {"begin", "(0, 2)", "end", "(2, 1)", NULL},
        {"begin", "(0, 5)", "end", "(2, 6)", NULL},
        {"begin", "(1, 3)", "end", "(2, 2)", "step", "(1, 1)"},
        {"begin", "(None, 0)", "end", "(None, 2)", "step", "(1, -1)"},
    };
    static const mxc_shape want[] = {SHAPE(2, 0, 4), SHAPE(2, 0, 4), SHAPE(1, 0, 4),
                                     SHAPE(2, 0, 4)};
    struct mxct_tensor x = mxct_tensor_random(SHAPE(2, 3, 4), -1, 1, 5);
    for (int k = 0; k < 4; k++) {
        const char *kv[7] = {NULL};
        for (int i = 0; i < 6 && specs[k][i]; i++)
            kv[i] = specs[k][i];
        struct mxct_params params = mxct_params_from_pairs(kv);
        struct mxct_tensor out[1], grads[1], og = mxct_tensor_from(want[k], NULL);
        CK_OK(mxct_op_forward("slice", params, false, &x, 1, NULL, out));
        mxct_expect_shape(&out[0].shape, &want[k], specs[k][1]);
        CK_OK(mxct_op_backward("slice", params, true, &x, 1, NULL, &og, grads));
        float zeros[24] = {0};
        mxct_expect_close(&grads[0], zeros, 0, 0, "gradient of an empty slice");
        mxct_tensors_free(out, 1);
        mxct_tensors_free(grads, 1);
        mxct_tensors_free(&og, 1);
    }
    mxct_tensors_free(&x, 1);
}
END_TEST

START_TEST(test_params_print_back) {
    struct mxct_params sl = MXCT_KV("begin", "(1, None, -2)", "end", "[None,3 , None]");
    mxct_expect_param("slice", sl, "begin", "(1, None, -2)");
    mxct_expect_param("slice", sl, "end", "(None, 3, None)");
    mxct_expect_param("slice", sl, "step", "()");
    mxct_expect_param("slice", MXCT_KV("begin", "(None,)", "end", "(2,)"), "begin", "(None,)");
    mxct_expect_param("squeeze", MXCT_NO_PARAMS, "axis", "None");
    mxct_expect_param("squeeze", MXCT_KV("axis", "(0, 2)"), "axis", "(0, 2)");
    struct mxct_params sa = MXCT_KV("axis", "0", "begin", "1", "end", "None");
    mxct_expect_param("slice_axis", sa, "end", "None");
    mxct_expect_param("slice_axis", MXCT_KV("axis", "0", "begin", "1", "end", "-1"), "end", "-1");
    mxct_expect_param("repeat", MXCT_KV("repeats", "2"), "axis", "None");
    mxct_expect_param("broadcast_like", MXCT_KV("lhs_axes", "(0,)", "rhs_axes", "(1,)"), "lhs_axes",
                      "(0,)");
    mxct_expect_param("stack", MXCT_KV("num_args", "2"), "axis", "0");
    /* every default shows in the introspection */
    mxc_op_info info;
    CK_OK(mxc_op_get_info("slice_axis", &info));
    ck_assert_str_eq(info.params[2].name, "end");
    ck_assert_str_eq(info.params[2].type, "int or None");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_tensor");
    TCase *tc = tcase_create("aliases");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_alias_lookup, 0, (int)MXC_ARRAY_SIZE(aliases));
    tcase_add_test(tc, test_alias_unknown);
    tcase_add_test(tc, test_alias_invoke);
    tcase_add_test(tc, test_alias_symbol_json);
    suite_add_tcase(s, tc);

    tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    tcase_add_test(tc, test_empty_slices);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_bad_squeeze_swap_flip);
    tcase_add_test(tc, test_bad_slices);
    tcase_add_test(tc, test_bad_stack_tile_repeat);
    tcase_add_test(tc, test_bad_broadcasts);
    tcase_add_test(tc, test_params_print_back);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
