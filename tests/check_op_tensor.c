/*
 * tests/check_op_tensor.c — MXNet's aliases of operator names (resolved by the registry)
 * and the tensor-manipulation family.
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

static Suite *suite(void) {
    Suite *s = suite_create("op_tensor");
    TCase *tc = tcase_create("aliases");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_alias_lookup, 0, (int)MXC_ARRAY_SIZE(aliases));
    tcase_add_test(tc, test_alias_unknown);
    tcase_add_test(tc, test_alias_invoke);
    tcase_add_test(tc, test_alias_symbol_json);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
