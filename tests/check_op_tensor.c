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

static struct mxct_tensor ref(const struct ref_case *c, const char *prefix, int i) {
    char file[256], name[16];
    snprintf(file, sizeof file, "ops/tensor/%s.params", c->file);
    snprintf(name, sizeof name, "%s%d", prefix, i);
    return mxct_ref_load(file, name);
}

/* The output's shape and values (exact: elements are moved, or summed in the same order
 * for the copies' gradients within float rounding), then every input's gradient for
 * MXNet's head gradient; the harness also runs both in place where declared, and on gpu(0)
 * against the CPU. */
START_TEST(test_reference) {
    const struct ref_case *c = &ref_cases[_i];
    struct mxct_params kv = mxct_params_from_pairs(c->kv);
    struct mxct_tensor in[MAX_IN], out[1], want = ref(c, "out", 0), og = ref(c, "og", 0),
                                           grads[MAX_IN];
    char what[160];
    for (int i = 0; i < c->num_in; i++)
        in[i] = ref(c, "in", i);
    int rc = mxct_op_forward(c->op, kv, false, in, c->num_in, NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    snprintf(what, sizeof what, "%s output shape vs MXNet", c->file);
    mxct_expect_shape(&out[0].shape, &want.shape, what);
    snprintf(what, sizeof what, "%s output vs MXNet", c->file);
    mxct_expect_close(&out[0], want.data, 0, 0, what);
    rc = mxct_op_backward(c->op, kv, true, in, c->num_in, NULL, &og, grads);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    for (int i = 0; i < c->num_in; i++) {
        struct mxct_tensor g = ref(c, "grad", i);
        snprintf(what, sizeof what, "%s gradient of input %d vs MXNet", c->file, i);
        mxct_expect_close(&grads[i], g.data, 1e-6, 1e-6, what);
        mxct_tensors_free(&g, 1);
    }
    mxct_tensors_free(grads, c->num_in);
    mxct_tensors_free(in, c->num_in);
    mxct_tensors_free(out, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(&og, 1);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
