/*
 * tests/check_op_shape.c — the shape, joining and lookup family: Flatten, Reshape,
 * transpose, expand_dims, Concat, SliceChannel, ElementWiseSum and Embedding. Output
 * shapes, forward values and input gradients against MXNet 1.9.1 references
 * (tests/data/ops/shape, made by scripts/gen_op_refs_shape.py; Reshape has one case per
 * special value, forward and reverse), finite-difference gradient checks with write and
 * add-to requests, shape inference (deduction both ways where natural, conflicts and
 * impossible reshapes), parameter tables (defaults, bounds, missing keys) and one run of
 * each through mxc_imperative_invoke and the engine (ElementWiseSum also in place).
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 4

static mxc_shape shp(int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d};
    return mxc_shape_make(ndim, dims);
}

/* ---- Reference cases (parameters as in scripts/gen_op_refs_shape.py) ----------------- */

struct ref_case {
    const char *file; /* tests/data/ops/shape/<file>.params */
    const char *op;
    int num_in, num_out;
    unsigned no_grad; /* inputs MXNet gives no gradient (Embedding's indices) */
    const char *kv[8];
};

static const struct ref_case ref_cases[] = {
    {"flatten_3d", "Flatten", 1, 1, 0, {NULL}},
    {"flatten_1d", "Flatten", 1, 1, 0, {NULL}},
    {"reshape_plain", "Reshape", 1, 1, 0, {"shape", "(5, 4, 6)"}},
    {"reshape_copy_infer", "Reshape", 1, 1, 0, {"shape", "(0, -1)"}},
    {"reshape_copy_infer_rev", "Reshape", 1, 1, 0, {"shape", "(0, -1)", "reverse", "True"}},
    {"reshape_infer_copy", "Reshape", 1, 1, 0, {"shape", "(-1, 0)"}},
    {"reshape_infer_copy_rev", "Reshape", 1, 1, 0, {"shape", "(-1, 0)", "reverse", "True"}},
    {"reshape_infer_only", "Reshape", 1, 1, 0, {"shape", "(-1,)"}},
    {"reshape_rest", "Reshape", 1, 1, 0, {"shape", "(-2,)"}},
    {"reshape_rest_ones", "Reshape", 1, 1, 0, {"shape", "(-2, 1, 1)"}},
    {"reshape_merge_rest", "Reshape", 1, 1, 0, {"shape", "(-3, -2)"}},
    {"reshape_merge_twice", "Reshape", 1, 1, 0, {"shape", "(-3, -3)"}},
    {"reshape_copy_merge", "Reshape", 1, 1, 0, {"shape", "(0, 0, -3)"}},
    {"reshape_copy_merge_rev", "Reshape", 1, 1, 0, {"shape", "(-3, 0, 0)", "reverse", "True"}},
    {"reshape_split", "Reshape", 1, 1, 0, {"shape", "(2, -4, 1, 3, -2)"}},
    {"reshape_split_infer_l", "Reshape", 1, 1, 0, {"shape", "(-4, -1, 2, -2)"}},
    {"reshape_split_infer_r", "Reshape", 1, 1, 0, {"shape", "(0, -4, 3, -1, -2)"}},
    {"reshape_split_rev", "Reshape", 1, 1, 0, {"shape", "(-2, 2, 2, -4, 0)", "reverse", "True"}},
    {"reshape_infer_last", "Reshape", 1, 1, 0, {"shape", "(2, 3, 4, 5, -1)"}},
    {"transpose_default", "transpose", 1, 1, 0, {NULL}},
    {"transpose_axes", "transpose", 1, 1, 0, {"axes", "(1, 0, 2)"}},
    {"transpose_4d", "transpose", 1, 1, 0, {"axes", "(0, 2, 3, 1)"}},
    {"expand_dims_0", "expand_dims", 1, 1, 0, {"axis", "0"}},
    {"expand_dims_1", "expand_dims", 1, 1, 0, {"axis", "1"}},
    {"expand_dims_neg", "expand_dims", 1, 1, 0, {"axis", "-1"}},
    {"expand_dims_neg3", "expand_dims", 1, 1, 0, {"axis", "-3"}},
    {"concat_dim1", "Concat", 3, 1, 0, {"num_args", "3", "dim", "1"}},
    {"concat_dim0", "Concat", 2, 1, 0, {"num_args", "2", "dim", "0"}},
    {"concat_neg", "Concat", 2, 1, 0, {"num_args", "2", "dim", "-1"}},
    {"slice_axis1", "SliceChannel", 1, 3, 0, {"num_outputs", "3"}},
    {"slice_axis0", "SliceChannel", 1, 2, 0, {"num_outputs", "2", "axis", "0"}},
    {"slice_squeeze",
     "SliceChannel",
     1,
     3,
     0,
     {"num_outputs", "3", "axis", "-1", "squeeze_axis", "True"}},
    {"sum_three", "ElementWiseSum", 3, 1, 0, {"num_args", "3"}},
    {"sum_one", "ElementWiseSum", 1, 1, 0, {"num_args", "1"}},
    {"embedding", "Embedding", 2, 1, 1, {"input_dim", "5", "output_dim", "4"}},
    {"embedding_1d", "Embedding", 2, 1, 1, {"input_dim", "3", "output_dim", "2"}},
};

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    struct mxct_ref_case r =
        mxct_ref_case_of("shape", c->file, c->op, c->kv, c->num_in, c->num_out);
    r.grad_skip = c->no_grad;
    return r;
}

/* Output shapes (MXNet's shape inference) and values. */
START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    /* copies are exact; sums may round differently */
    double tol = strcmp(r.op, "ElementWiseSum") == 0 ? 1e-6 : 0;
    mxct_ref_expect_forward(&r, false, tol, tol);
}
END_TEST

START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-6, 1e-6);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in;
    mxc_shape shapes[3];
    const char *kv[8];
};

static const struct grad_case grad_cases[] = {
    {"Flatten", 1, {{3, {2, 3, 2}}}, {NULL}},
    {"Reshape", 1, {{3, {2, 3, 4}}}, {"shape", "(-4, 1, 2, -3)"}},
    {"Reshape", 1, {{3, {2, 3, 4}}}, {"shape", "(0, -1)", "reverse", "True"}},
    {"transpose", 1, {{3, {2, 3, 4}}}, {NULL}},
    {"transpose", 1, {{4, {2, 3, 2, 2}}}, {"axes", "(2, 0, 3, 1)"}},
    {"expand_dims", 1, {{2, {3, 4}}}, {"axis", "-2"}},
    {"Concat", 3, {{3, {2, 1, 3}}, {3, {2, 2, 3}}, {3, {2, 3, 3}}}, {"num_args", "3"}},
    {"Concat", 2, {{2, {2, 3}}, {2, {2, 1}}}, {"num_args", "2", "dim", "-1"}},
    {"SliceChannel", 1, {{3, {2, 6, 2}}}, {"num_outputs", "3"}},
    {"SliceChannel",
     1,
     {{3, {2, 2, 3}}},
     {"num_outputs", "3", "axis", "2", "squeeze_axis", "True"}},
    {"ElementWiseSum", 3, {{2, {2, 3}}, {2, {2, 3}}, {2, {2, 3}}}, {"num_args", "3"}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in[3];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], -1, 1, 10u + (unsigned)i);
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* Embedding: indices with repeats, a fraction and clipped values; weight differentiated,
 * the indices not (bit 0 of skip). */
START_TEST(test_gradient_embedding) {
    static const float idx[] = {0, 3, 3, 1.5f, -2, 7, 2, 0};
    struct mxct_tensor in[2] = {mxct_tensor_from(shp(2, 2, 4, 0, 0), idx),
                                mxct_tensor_random(shp(2, 4, 3, 0, 0), -1, 1, 3)};
    mxct_op_gradcheck("Embedding", MXCT_KV("input_dim", "4", "output_dim", "3"), true, in, 2, NULL,
                      1u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Shape inference ------------------------------------------------------------------ */

/* Reshape of (2, 3, 4, 5) with `spec` fails with `code` and a message holding `needle`. */
static void expect_bad_reshape(const char *spec, const char *reverse, int code,
                               const char *needle) {
    mxc_shape in = shp(4, 2, 3, 4, 5), out = {0};
    mxct_expect_error(
        mxct_op_infer("Reshape", MXCT_KV("shape", spec, "reverse", reverse), &in, 1, &out, 1), code,
        MXCT_NEEDLES("Reshape", "(2, 3, 4, 5)", needle));
    ck_assert_int_eq(out.ndim, 0);
}

START_TEST(test_shape_reshape) {
    /* the impossible ones MXNet also rejects */
    expect_bad_reshape("(-1, -1)", "False", MXC_ESHAPE, "only one");
    expect_bad_reshape("(0, 0, 0, 0, 0)", "False", MXC_ESHAPE, "no data axis left");
    expect_bad_reshape("(-3, -3, -3)", "False", MXC_ESHAPE, "needs two data axes");
    expect_bad_reshape("(-4, -1, -1, -2)", "False", MXC_ESHAPE, "two -1");
    expect_bad_reshape("(-4, 3, 3, -2)", "False", MXC_ESHAPE, "do not make 2");
    expect_bad_reshape("(2, -4, 1, 3, -2)", "True", MXC_ESHAPE, "followed by two");
    expect_bad_reshape("(-2, -4, 1, 5)", "False", MXC_ESHAPE, "no data axis left");
    expect_bad_reshape("(0, -5)", "False", MXC_ESHAPE, "-5");
    /* and the ones MXNet 1.9.1 lets through with a wrong element count */
    expect_bad_reshape("(5, 4, 7)", "False", MXC_ESHAPE, "(5, 4, 7)");
    expect_bad_reshape("(-2, 1, 1)", "True", MXC_ESHAPE, "(2, 3, 1, 1)");
    expect_bad_reshape("(7, -1)", "False", MXC_ESHAPE, "cannot be inferred");
    /* too many dimensions */
    expect_bad_reshape("(-2, 1, 1, 1, 1, 1)", "False", MXC_ESHAPE, "more than 8");

    /* MXNet's -1 index bug: -2 then -1 infers the -1, not the second axis */
    mxc_shape in = shp(4, 2, 3, 4, 5), out = {0};
    ck_assert_int_eq(mxct_op_infer("Reshape", MXCT_KV("shape", "(-2, -1)"), &in, 1, &out, 1),
                     MXC_OK);
    ck_assert_int_eq(out.ndim, 5);
    ck_assert_int_eq(out.dims[1], 3);
    ck_assert_int_eq(out.dims[4], 1);

    /* no target: the given output, if it has data's size */
    out = shp(2, 12, 10, 0, 0);
    ck_assert_int_eq(mxct_op_infer("Reshape", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 12, 10, 0, 0)}, "reshape to the given output");
    out = shp(2, 12, 11, 0, 0);
    mxct_expect_error(mxct_op_infer("Reshape", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("Reshape", "(12, 11)", "(2, 3, 4, 5)"));
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Reshape", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);
    /* a given output that disagrees with shape */
    out = shp(2, 60, 2, 0, 0);
    mxct_expect_error(mxct_op_infer("Reshape", MXCT_KV("shape", "(0, -1)"), &in, 1, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Reshape", "output", "(60, 2)", "(2, 60)"));
    /* unknown data: nothing deduced, no error */
    mxc_shape unk = {0};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Reshape", MXCT_KV("shape", "(0, -1)"), &unk, 1, &out, 1),
                     MXC_OK);
    ck_assert_int_eq(out.ndim, 0);
    ck_assert_int_eq(unk.ndim, 0);
    /* target sizes whose product leaves int64, beside a -1 or in a -4 split (the products
     * overflowed; found with tests/fuzz/op_params) */
    mxc_shape six = shp(1, 6, 0, 0, 0);
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("Reshape", MXCT_KV("shape", "(-1, 4611686018427387904, 4)"),
                                    &six, 1, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Reshape", "int64"));
    mxct_expect_error(mxct_op_infer("Reshape", MXCT_KV("shape", "(-4, 4611686018427387904, 4)"),
                                    &six, 1, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Reshape", "do not make 6"));

    /* Flatten */
    unk = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Flatten", MXCT_NO_PARAMS, &unk, 1, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);
    in = shp(3, 2, 3, 4, 0);
    out = shp(2, 2, 13, 0, 0);
    mxct_expect_error(mxct_op_infer("Flatten", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("Flatten", "output", "(2, 13)", "(2, 12)"));
}
END_TEST

START_TEST(test_shape_transpose_expand) {
    /* transpose: the output gives data back through the inverse permutation */
    mxc_shape in = {0}, out = shp(3, 4, 2, 3, 0);
    ck_assert_int_eq(mxct_op_infer("transpose", MXCT_KV("axes", "(1, 2, 0)"), &in, 1, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(3, 3, 4, 2, 0)}, "transpose data from output");
    in = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("transpose", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(3, 3, 2, 4, 0)},
                      "transpose (reversed) data from output");
    in = shp(3, 2, 3, 4, 0);
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("transpose", MXCT_KV("axes", "(0, 1)"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("transpose", "axes", "(0, 1)"));
    mxct_expect_error(mxct_op_infer("transpose", MXCT_KV("axes", "(0, 1, 1)"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("transpose", "permutation"));
    mxct_expect_error(mxct_op_infer("transpose", MXCT_KV("axes", "(-1, 0, 1)"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("transpose", "permutation"));
    out = shp(3, 4, 3, 3, 0);
    mxct_expect_error(mxct_op_infer("transpose", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("transpose", "output", "(4, 3, 3)", "(4, 3, 2)"));

    /* expand_dims: both ways, the axis range, the dimension limit */
    in = (mxc_shape){0};
    out = shp(3, 2, 1, 3, 0);
    ck_assert_int_eq(mxct_op_infer("expand_dims", MXCT_KV("axis", "-2"), &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "expand_dims data from output");
    in = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("expand_dims", MXCT_KV("axis", "0"), &in, 1, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("expand_dims", "(2, 1, 3)"));
    in = shp(2, 2, 3, 0, 0);
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("expand_dims", MXCT_KV("axis", "3"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("expand_dims", "axis=3", "[-3, 2]"));
    mxct_expect_error(mxct_op_infer("expand_dims", MXCT_KV("axis", "-4"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("axis=-4"));
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    in = mxc_shape_make(8, eight);
    mxct_expect_error(mxct_op_infer("expand_dims", MXCT_KV("axis", "0"), &in, 1, &out, 1),
                      MXC_ENOTSUP, MXCT_NEEDLES("expand_dims", "8"));
}
END_TEST

START_TEST(test_shape_concat) {
    /* one unknown input from the output and the others */
    mxc_shape in[3] = {shp(3, 2, 1, 3, 0), {0}, shp(3, 2, 3, 3, 0)};
    mxc_shape out = shp(3, 2, 7, 3, 0);
    ck_assert_int_eq(mxct_op_infer("Concat", MXCT_KV("num_args", "3"), in, 3, &out, 1), MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(3, 2, 3, 3, 0)}, "concat arg1 from output");
    /* a single unknown input of one is the output */
    mxc_shape one = {0};
    out = shp(2, 4, 5, 0, 0);
    ck_assert_int_eq(
        mxct_op_infer("Concat", MXCT_KV("num_args", "1", "dim", "0"), &one, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&one, (mxc_shape[]){shp(2, 4, 5, 0, 0)}, "concat single input");
    /* two unknown: nothing, no error */
    mxc_shape two[3] = {{0}, shp(2, 2, 2, 0, 0), {0}};
    out = shp(2, 2, 9, 0, 0);
    ck_assert_int_eq(mxct_op_infer("Concat", MXCT_KV("num_args", "3"), two, 3, &out, 1), MXC_OK);
    ck_assert_int_eq(two[0].ndim, 0);
    /* conflicts */
    mxc_shape bad[2] = {shp(3, 2, 1, 3, 0), shp(3, 2, 2, 4, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("Concat", MXCT_KV("num_args", "2"), bad, 2, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Concat", "arg1", "(2, 2, 4)", "(2, 2, 3)"));
    mxc_shape rank[2] = {shp(3, 2, 1, 3, 0), shp(2, 2, 2, 0, 0)};
    mxct_expect_error(mxct_op_infer("Concat", MXCT_KV("num_args", "2"), rank, 2, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Concat", "arg1", "(2, 2)"));
    mxc_shape ok[2] = {shp(2, 2, 1, 0, 0), shp(2, 2, 2, 0, 0)};
    out = shp(2, 2, 4, 0, 0);
    mxct_expect_error(mxct_op_infer("Concat", MXCT_KV("num_args", "2"), ok, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("Concat", "output", "(2, 4)", "(2, 3)"));
    mxc_shape small[2] = {shp(2, 2, 5, 0, 0), {0}};
    out = shp(2, 2, 4, 0, 0);
    mxct_expect_error(mxct_op_infer("Concat", MXCT_KV("num_args", "2"), small, 2, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Concat", "too small"));
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("Concat", MXCT_KV("num_args", "2", "dim", "2"), ok, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("Concat", "dim=2"));
    /* empty inputs whose sizes along dim add up past int64 (the sum overflowed; found by
     * tests/fuzz/op_params) */
    mxc_shape wide[3] = {shp(2, 0, 2, 0, 0), shp(2, 0, INT64_MAX, 0, 0), shp(2, 0, 2, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(
        mxct_op_infer("Concat", MXCT_KV("num_args", "3", "dim", "1"), wide, 3, &out, 1), MXC_ESHAPE,
        MXCT_NEEDLES("Concat", "int64", "arg1"));
}
END_TEST

/* Concat's backward with the first input's gradient off (MXC_GRAD_NULL: no memory) and
 * the last one's added to: it computed a pointer into the missing gradient (NULL + row,
 * undefined behaviour reported by clang's UBSan; found by tests/fuzz/op_params). */
START_TEST(test_concat_grad_reqs) {
    struct mxct_tensor in[3] = {mxct_tensor_random(shp(2, 2, 1, 0, 0), -1, 1, 1),
                                mxct_tensor_random(shp(2, 2, 2, 0, 0), -1, 1, 2),
                                mxct_tensor_random(shp(2, 2, 1, 0, 0), -1, 1, 3)};
    struct mxct_tensor head = mxct_tensor_random(shp(2, 2, 4, 0, 0), -1, 1, 4), g[3];
    mxct_op_bound_grads("Concat", MXCT_KV("num_args", "3", "dim", "1"), in, 3, NULL, 0,
                        (const int[]){MXC_GRAD_NULL, MXC_GRAD_WRITE, MXC_GRAD_ADD}, &head, g);
    ck_assert_ptr_null(g[0].data);
    const float *h = head.data;
    const float want1[4] = {h[1], h[2], h[5], h[6]};
    const float want2[2] = {in[2].data[0] + h[3], in[2].data[1] + h[7]};
    mxct_expect_close(&g[1], want1, 0, 0, "written gradient of arg1");
    mxct_expect_close(&g[2], want2, 1e-6, 0, "added gradient of arg2");
    mxct_tensors_free(g, 3);
    mxct_tensors_free(in, 3);
    mxct_tensors_free(&head, 1);
}
END_TEST

START_TEST(test_shape_slice_sum) {
    /* SliceChannel: names from num_outputs, data from equal outputs */
    const struct mxc__op_def *d = mxct_op_def("SliceChannel");
    _Alignas(16) unsigned char params[1024];
    struct mxct_params kv = MXCT_KV("num_outputs", "16");
    ck_assert_int_eq(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params), MXC_OK);
    const char *names[MXC__MAX_OP_ARGS];
    ck_assert_int_eq(mxc__op_num_outputs(d, params, names), 16);
    ck_assert_str_eq(names[0], "output0");
    ck_assert_str_eq(names[15], "output15");
    ck_assert_int_eq(mxc__op_num_visible_outputs(d, params), 16);
    kv = MXCT_KV("num_outputs", "17");
    mxct_expect_error(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params), MXC_EINVAL,
                      MXCT_NEEDLES("SliceChannel", "num_outputs", "16"));

    mxc_shape in = {0}, out[3] = {shp(2, 2, 2, 0, 0), shp(2, 2, 2, 0, 0), shp(2, 2, 2, 0, 0)};
    ck_assert_int_eq(mxct_op_infer("SliceChannel", MXCT_KV("num_outputs", "3"), &in, 1, out, 3),
                     MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(2, 2, 6, 0, 0)}, "slice data from outputs");
    in = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("SliceChannel",
                                   MXCT_KV("num_outputs", "3", "axis", "0", "squeeze_axis", "True"),
                                   &in, 1, out, 3),
                     MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(3, 3, 2, 2, 0)}, "slice (squeezed) data from outputs");
    in = (mxc_shape){0};
    out[1] = shp(2, 2, 3, 0, 0);
    mxct_expect_error(mxct_op_infer("SliceChannel", MXCT_KV("num_outputs", "3"), &in, 1, out, 3),
                      MXC_ESHAPE, MXCT_NEEDLES("SliceChannel", "output1", "(2, 3)", "(2, 2)"));
    in = shp(2, 2, 5, 0, 0);
    mxc_shape none[3] = {{0}};
    mxct_expect_error(mxct_op_infer("SliceChannel", MXCT_KV("num_outputs", "3"), &in, 1, none, 3),
                      MXC_ESHAPE, MXCT_NEEDLES("SliceChannel", "(2, 5)", "3 equal parts"));
    in = shp(2, 2, 6, 0, 0);
    mxct_expect_error(mxct_op_infer("SliceChannel",
                                    MXCT_KV("num_outputs", "3", "squeeze_axis", "True"), &in, 1,
                                    none, 3),
                      MXC_ESHAPE, MXCT_NEEDLES("SliceChannel", "squeeze_axis"));
    mxct_expect_error(
        mxct_op_infer("SliceChannel", MXCT_KV("num_outputs", "3", "axis", "2"), &in, 1, none, 3),
        MXC_EINVAL, MXCT_NEEDLES("SliceChannel", "axis=2"));

    /* ElementWiseSum: one shape for all, either way */
    mxc_shape s[3] = {{0}, {0}, {0}}, o = shp(2, 4, 5, 0, 0);
    ck_assert_int_eq(mxct_op_infer("ElementWiseSum", MXCT_KV("num_args", "3"), s, 3, &o, 1),
                     MXC_OK);
    for (int i = 0; i < 3; i++)
        mxct_expect_shape(&s[i], (mxc_shape[]){shp(2, 4, 5, 0, 0)}, "sum input from output");
    mxc_shape s2[2] = {{0}, shp(1, 7, 0, 0, 0)};
    o = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("ElementWiseSum", MXCT_KV("num_args", "2"), s2, 2, &o, 1),
                     MXC_OK);
    mxct_expect_shape(&s2[0], (mxc_shape[]){shp(1, 7, 0, 0, 0)}, "sum arg0 from arg1");
    mxct_expect_shape(&o, (mxc_shape[]){shp(1, 7, 0, 0, 0)}, "sum output");
    mxc_shape s3[2] = {shp(1, 7, 0, 0, 0), shp(1, 6, 0, 0, 0)};
    o = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("ElementWiseSum", MXCT_KV("num_args", "2"), s3, 2, &o, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("ElementWiseSum", "arg1", "(7)", "(6)"));
}
END_TEST

START_TEST(test_shape_embedding) {
    struct mxct_params kv = MXCT_KV("input_dim", "10", "output_dim", "4");
    mxc_shape in[2] = {shp(2, 2, 3, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("Embedding", kv, in, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(2, 10, 4, 0, 0)}, "embedding weight");
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 3, 4, 0)}, "embedding output");
    mxc_shape back[2] = {{0}}, bo = shp(3, 5, 6, 4, 0);
    ck_assert_int_eq(mxct_op_infer("Embedding", kv, back, 2, &bo, 1), MXC_OK);
    mxct_expect_shape(&back[0], (mxc_shape[]){shp(2, 5, 6, 0, 0)}, "embedding data from output");
    mxct_expect_shape(&back[1], (mxc_shape[]){shp(2, 10, 4, 0, 0)}, "embedding weight from params");
    mxc_shape unk[2] = {{0}}, uo = {0};
    ck_assert_int_eq(mxct_op_infer("Embedding", kv, unk, 2, &uo, 1), MXC_OK);
    ck_assert_int_eq(unk[0].ndim, 0);
    ck_assert_int_eq(uo.ndim, 0);

    mxc_shape bad[2] = {shp(1, 3, 0, 0, 0), shp(2, 10, 5, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("Embedding", kv, bad, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("Embedding", "weight", "(10, 5)", "(10, 4)"));
    mxc_shape bd[2] = {{0}}, bdo = shp(2, 3, 5, 0, 0);
    mxct_expect_error(mxct_op_infer("Embedding", kv, bd, 2, &bdo, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("Embedding", "(3, 5)", "output_dim=4"));
    mxc_shape ty[2] = {{0}};
    out = (mxc_shape){0};
    mxct_expect_error(
        mxct_op_infer("Embedding",
                      MXCT_KV("input_dim", "10", "output_dim", "4", "dtype", "float16"), ty, 2,
                      &out, 1),
        MXC_ENOTSUP, MXCT_NEEDLES("Embedding", "float16"));
}
END_TEST

/* ---- Parameters ------------------------------------------------------------------------ */

START_TEST(test_params) {
    mxct_expect_param("Reshape", MXCT_NO_PARAMS, "shape", "()");
    mxct_expect_param("Reshape", MXCT_NO_PARAMS, "reverse", "False");
    mxct_expect_param("Reshape", MXCT_KV("shape", "(0, -1)"), "shape", "(0, -1)");
    mxct_expect_param("transpose", MXCT_NO_PARAMS, "axes", "()");
    mxct_expect_param("Concat", MXCT_KV("num_args", "2"), "dim", "1");
    mxct_expect_param("SliceChannel", MXCT_KV("num_outputs", "2"), "axis", "1");
    mxct_expect_param("SliceChannel", MXCT_KV("num_outputs", "2"), "squeeze_axis", "False");
    struct mxct_params emb = MXCT_KV("input_dim", "5", "output_dim", "3");
    mxct_expect_param("Embedding", emb, "dtype", "float32");
    mxct_expect_param("Embedding", emb, "sparse_grad", "False");
    ck_assert_int_eq(mxct_op_def("Flatten")->num_params, 0);

    mxct_expect_error(mxct_op_parse("Concat", MXCT_NO_PARAMS), MXC_EINVAL,
                      MXCT_NEEDLES("Concat", "num_args"));
    mxct_expect_error(mxct_op_parse("Concat", MXCT_KV("num_args", "0")), MXC_EINVAL,
                      MXCT_NEEDLES("num_args"));
    mxct_expect_error(mxct_op_parse("Concat", MXCT_KV("num_args", "17")), MXC_EINVAL,
                      MXCT_NEEDLES("num_args", "16"));
    mxct_expect_error(mxct_op_parse("ElementWiseSum", MXCT_NO_PARAMS), MXC_EINVAL,
                      MXCT_NEEDLES("ElementWiseSum", "num_args"));
    mxct_expect_error(mxct_op_parse("SliceChannel", MXCT_KV("axis", "0")), MXC_EINVAL,
                      MXCT_NEEDLES("SliceChannel", "num_outputs"));
    mxct_expect_error(mxct_op_parse("Embedding", MXCT_KV("input_dim", "5")), MXC_EINVAL,
                      MXCT_NEEDLES("Embedding", "output_dim"));
    mxct_expect_error(mxct_op_parse("Embedding", MXCT_KV("output_dim", "5")), MXC_EINVAL,
                      MXCT_NEEDLES("Embedding", "input_dim"));
    mxct_expect_error(mxct_op_parse("Embedding", MXCT_KV("input_dim", "0", "output_dim", "5")),
                      MXC_EINVAL, MXCT_NEEDLES("input_dim"));
    mxct_expect_error(
        mxct_op_parse("Embedding", MXCT_KV("input_dim", "2", "output_dim", "5", "dtype", "float8")),
        MXC_EINVAL, MXCT_NEEDLES("dtype", "float32"));
    mxct_expect_error(mxct_op_parse("expand_dims", MXCT_NO_PARAMS), MXC_EINVAL,
                      MXCT_NEEDLES("expand_dims", "axis"));
    mxct_expect_error(mxct_op_parse("Reshape", MXCT_KV("shape", "(2, x)")), MXC_EINVAL,
                      MXCT_NEEDLES("Reshape", "shape"));
    mxct_expect_error(mxct_op_parse("Reshape", MXCT_KV("target_shape", "(2, 3)")), MXC_EINVAL,
                      MXCT_NEEDLES("target_shape", "reverse"));
    mxct_expect_error(mxct_op_parse("Flatten", MXCT_KV("axis", "1")), MXC_EINVAL,
                      MXCT_NEEDLES("Flatten", "axis"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* Reads `a` back and compares it with `want` exactly (shape included). */
/* One case of each operator through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    static const char *const picks[] = {
        "flatten_3d",  "reshape_split_infer_r", "transpose_4d", "expand_dims_neg",
        "concat_dim1", "slice_axis1",           "sum_three",    "embedding"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, false, 1e-6, 1e-6);
    /* a wrong input is an error naming it and both shapes, not a crash */
    if (strcmp(c->op, "Concat") == 0)
        mxct_ref_expect_invoke_error(&r, 1, shp(3, 2, 2, 4, 0), MXC_ESHAPE,
                                     MXCT_NEEDLES("Concat", "arg1", "(2, 2, 4)"));
}
END_TEST

/* ElementWiseSum written in place over its first input. */
START_TEST(test_invoke_sum_in_place) {
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, "sum_three") != 0)
        c++;
    struct mxct_params kv = mxct_params_from_pairs(c->kv);
    struct mxct_tensor in[MAX_IO], want;
    mxct_ref_load_case("shape", c->file, "in", c->num_in, in);
    mxct_ref_load_case("shape", c->file, "out", 1, &want);
    mxc_ndarray *arrays[MAX_IO];
    for (int i = 0; i < c->num_in; i++)
        arrays[i] = mxct_array_of(&in[i]);
    mxc_ndarray *inplace[1] = {arrays[0]};
    int rc =
        mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, c->num_in, arrays, 1, inplace, 0);
    ck_assert_msg(rc == MXC_OK, "%s in place: %s", c->op, mxc_last_error());
    ck_assert_ptr_eq(inplace[0], arrays[0]);
    struct mxct_tensor got = mxct_tensor_of(arrays[0]);
    mxct_expect_tensor(&got, &want, 1e-6, 1e-6, "ElementWiseSum in place over arg0");
    mxct_tensors_free(&got, 1);
    for (int i = 0; i < c->num_in; i++)
        mxc_nd_free(arrays[i]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_shape");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    tcase_add_test(tc, test_gradient_embedding);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_reshape);
    tcase_add_test(tc, test_shape_transpose_expand);
    tcase_add_test(tc, test_shape_concat);
    tcase_add_test(tc, test_concat_grad_reqs);
    tcase_add_test(tc, test_shape_slice_sum);
    tcase_add_test(tc, test_shape_embedding);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, 8);
    tcase_add_test(tc, test_invoke_sum_in_place);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
