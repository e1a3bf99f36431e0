/*
 * tests/check_op_index.c — the indexing, selection and sorting family: where, take, pick,
 * one_hot, argmax, argmin, argmax_channel, topk, sort, argsort and gather_nd. Output shapes,
 * forward values and input gradients against MXNet 1.9.1 references (tests/data/ops/index, made
 * by scripts/gen_op_refs_index.py: ties, NaN, out-of-range and fractional indices under
 * clip and wrap, negative axes), finite-difference gradient checks with write and add-to
 * requests where the output is differentiable in the data, shape inference both ways and
 * its conflicts, parameter tables (defaults, bounds, unsupported values) and runs through
 * mxc_imperative_invoke and the engine.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 4

/* ---- Reference cases (parameters as in scripts/gen_op_refs_index.py) ----------------- */

struct ref_case {
    const char *file; /* tests/data/ops/index/<file>.params */
    const char *op;
    int num_in, num_out;
    bool no_backward;  /* MXNet does not differentiate it */
    const char *kv[9]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"where_same", "where", 3, 1, false, {NULL}},
    {"where_1d", "where", 3, 1, false, {NULL}},
    {"take_clip", "take", 2, 1, false, {NULL}},
    {"take_wrap", "take", 2, 1, false, {"mode", "wrap"}},
    {"take_raise", "take", 2, 1, false, {"mode", "raise"}},
    {"take_axis1", "take", 2, 1, false, {"axis", "1", "mode", "wrap"}},
    {"take_axis_neg", "take", 2, 1, false, {"axis", "-1"}},
    {"pick_clip", "pick", 2, 1, false, {NULL}},
    {"pick_wrap", "pick", 2, 1, false, {"axis", "1", "mode", "wrap"}},
    {"pick_axis0_keep", "pick", 2, 1, false, {"axis", "0", "keepdims", "True"}},
    {"pick_3d", "pick", 2, 1, false, {"axis", "-2"}},
    {"pick_index_kept", "pick", 2, 1, false, {"axis", "1"}},
    {"one_hot", "one_hot", 1, 1, false, {"depth", "4", "on_value", "2.5", "off_value", "-1"}},
    {"one_hot_default", "one_hot", 1, 1, false, {"depth", "3"}},
    {"argmax_axis1", "argmax", 1, 1, false, {"axis", "1"}},
    {"argmax_none", "argmax", 1, 1, false, {NULL}},
    {"argmax_none_keep", "argmax", 1, 1, false, {"keepdims", "True"}},
    {"argmax_neg_keep", "argmax", 1, 1, false, {"axis", "-2", "keepdims", "True"}},
    {"argmin_axis0", "argmin", 1, 1, false, {"axis", "0"}},
    {"argmin_none", "argmin", 1, 1, false, {NULL}},
    {"argmax_nan", "argmax", 1, 1, false, {"axis", "1"}},
    {"argmin_nan", "argmin", 1, 1, false, {"axis", "-1"}},
    {"argmax_channel", "argmax_channel", 1, 1, true, {NULL}},
    {"argmax_channel_3d", "argmax_channel", 1, 1, true, {NULL}},
    {"topk_default", "topk", 1, 1, false, {NULL}},
    {"topk_both", "topk", 1, 2, false, {"k", "3", "ret_typ", "both"}},
    {"topk_value_asc",
     "topk",
     1,
     1,
     false,
     {"axis", "0", "k", "2", "ret_typ", "value", "is_ascend", "True"}},
    {"topk_mask", "topk", 1, 1, false, {"axis", "1", "k", "2", "ret_typ", "mask"}},
    {"topk_none", "topk", 1, 2, false, {"axis", "None", "k", "4", "ret_typ", "both"}},
    {"topk_all", "topk", 1, 1, false, {"k", "0", "ret_typ", "value"}},
    {"topk_neg_axis", "topk", 1, 1, false, {"axis", "-2", "k", "2", "ret_typ", "value"}},
    {"sort_last", "sort", 1, 1, false, {"axis", "-1"}},
    {"sort_desc", "sort", 1, 1, false, {"axis", "0", "is_ascend", "False"}},
    {"sort_3d", "sort", 1, 1, false, {"axis", "1"}},
    {"argsort_last", "argsort", 1, 1, false, {"axis", "-1"}},
    {"argsort_desc", "argsort", 1, 1, false, {"axis", "1", "is_ascend", "False"}},
    {"gather_nd_2d", "gather_nd", 2, 1, false, {NULL}},
    {"gather_nd_slices", "gather_nd", 2, 1, false, {NULL}},
    {"gather_nd_neg", "gather_nd", 2, 1, true, {NULL}},
};

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    return mxct_ref_case_of("index", c->file, c->op, c->kv, c->num_in, c->num_out);
}

/* Output shapes (MXNet's shape inference) and values: selections are exact. */
START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, false, 0, 0);
}
END_TEST

/* The backward with out_grad = og*, each input gradient against MXNet's (zeros for
 * indices and conditions); sums of scattered gradients may round differently. */
START_TEST(test_backward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    if (c->no_backward) {
        mxc_op_info info;
        CK_OK(mxc_op_get_info(c->op, &info));
        bool mxnet_bug = strcmp(c->op, "gather_nd") == 0; /* its gradient is checked below */
        ck_assert_msg(mxnet_bug || !info.differentiable, "%s is differentiable; MXNet's is not",
                      c->op);
        return;
    }
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_backward(&r, 1e-6, 1e-6);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

static mxc_shape shp(int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d};
    return mxc_shape_make(ndim, dims);
}

/* where: the gradient reaches x or y by the condition (a 1-D one too); none for it. */
START_TEST(test_gradient_where) {
    static const float cond[] = {1, 0, 0, 2, 0, -1}, cond1[] = {0, 1};
    struct mxct_tensor in[3] = {mxct_tensor_from(shp(2, 2, 3, 0, 0), cond),
                                mxct_tensor_random(shp(2, 2, 3, 0, 0), -1, 1, 1),
                                mxct_tensor_random(shp(2, 2, 3, 0, 0), -1, 1, 2)};
    mxct_op_gradcheck("where", MXCT_NO_PARAMS, true, in, 3, NULL, 1u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, 1);
    in[0] = mxct_tensor_from(shp(1, 2, 0, 0, 0), cond1);
    mxct_op_gradcheck("where", MXCT_NO_PARAMS, true, in, 3, NULL, 1u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, 3);
}
END_TEST

/* take and pick: the gradient reaches data (scattered, repeats summed), not the indices
 * (bit 1 of skip); out-of-range indices under clip and wrap. */
START_TEST(test_gradient_take_pick) {
    static const float idx[] = {0, 3, -1, 7, 1.5f, 3};
    struct mxct_tensor in[2] = {mxct_tensor_random(shp(2, 4, 3, 0, 0), -1, 1, 3),
                                mxct_tensor_from(shp(2, 2, 3, 0, 0), idx)};
    mxct_op_gradcheck("take", MXCT_NO_PARAMS, true, in, 2, NULL, 2u, 1e-2, 1e-2, 1e-3);
    mxct_op_gradcheck("take", MXCT_KV("axis", "1", "mode", "wrap"), true, in, 2, NULL, 2u, 1e-2,
                      1e-2, 1e-3);
    mxct_tensors_free(in, 2);
    in[0] = mxct_tensor_random(shp(3, 2, 5, 3, 0), -1, 1, 4);
    in[1] = mxct_tensor_from(shp(2, 2, 3, 0, 0), idx);
    mxct_op_gradcheck("pick", MXCT_KV("axis", "1"), true, in, 2, NULL, 2u, 1e-2, 1e-2, 1e-3);
    mxct_op_gradcheck("pick", MXCT_KV("axis", "-2", "mode", "wrap", "keepdims", "True"), true, in,
                      2, NULL, 2u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, 2);
}
END_TEST

/* one_hot's gradient is zero (MXNet's): written as 0, added as nothing. */
START_TEST(test_gradient_one_hot) {
    static const float idx[] = {0.5f, 2.5f, 5}; /* finite differences do not cross a class */
    struct mxct_tensor in = mxct_tensor_from(shp(1, 3, 0, 0, 0), idx);
    mxct_op_gradcheck("one_hot", MXCT_KV("depth", "4"), true, &in, 1, NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* topk's values and sort: each kept element gets its head gradient. The values are a
 * shuffled ladder 0.1 apart, so no finite difference reorders them. */
START_TEST(test_gradient_sort) {
    float v[24];
    for (int i = 0; i < 24; i++)
        v[i] = 0.1f * (float)((i * 7) % 24) - 1.2f;
    struct mxct_tensor in = mxct_tensor_from(shp(3, 2, 3, 4, 0), v);
    mxct_op_gradcheck("topk", MXCT_KV("k", "2", "ret_typ", "value"), true, &in, 1, NULL, 0, 1e-2,
                      1e-2, 1e-3);
    mxct_op_gradcheck("topk",
                      MXCT_KV("axis", "1", "k", "2", "ret_typ", "both", "is_ascend", "True"), true,
                      &in, 1, NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_op_gradcheck("topk", MXCT_KV("axis", "None", "k", "5", "ret_typ", "value"), true, &in, 1,
                      NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_op_gradcheck("sort", MXCT_KV("axis", "0", "is_ascend", "False"), true, &in, 1, NULL, 0,
                      1e-2, 1e-2, 1e-3);
    /* indices and masks: zero, as MXNet's */
    mxct_op_gradcheck("argsort", MXCT_NO_PARAMS, true, &in, 1, NULL, 0, 1e-2, 1e-2, 1e-3);
    mxct_op_gradcheck("topk", MXCT_KV("k", "3", "ret_typ", "mask"), true, &in, 1, NULL, 0, 1e-2,
                      1e-2, 1e-3);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* NaN sorts after every number, both ways (mxc's rule; MXNet's order with NaN is not
 * defined), and the GPU's ranking gives the same. */
START_TEST(test_sort_nan) {
    const float x[5] = {2, NAN, -1, NAN, 2};
    struct mxct_tensor in = mxct_tensor_from(shp(1, 5, 0, 0, 0), x), out[2];
    CK_OK(mxct_op_forward("topk", MXCT_KV("k", "0", "ret_typ", "both"), false, &in, 1, NULL, out));
    const float desc_idx[5] = {0, 4, 2, 1, 3};
    mxct_expect_close(&out[1], desc_idx, 0, 0, "descending order with NaN");
    mxct_tensors_free(out, 2);
    CK_OK(mxct_op_forward("argsort", MXCT_NO_PARAMS, false, &in, 1, NULL, out));
    const float asc_idx[5] = {2, 0, 4, 1, 3};
    mxct_expect_close(&out[0], asc_idx, 0, 0, "ascending order with NaN");
    mxct_tensors_free(out, 1);
    mxct_tensors_free(&in, 1);
}
END_TEST

/* gather_nd: the gradient is scattered to the gathered elements (repeats summed). */
START_TEST(test_gradient_gather_nd) {
    static const float idx[] = {0, 2, -1, 0, 1, 0, 1, 1};
    struct mxct_tensor in[2] = {mxct_tensor_random(shp(3, 3, 2, 2, 0), -1, 1, 11),
                                mxct_tensor_from(shp(2, 2, 4, 0, 0), idx)};
    mxct_op_gradcheck("gather_nd", MXCT_NO_PARAMS, true, in, 2, NULL, 2u, 1e-2, 1e-2, 1e-3);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Shape inference ----------------------------------------------------------------- */

START_TEST(test_shape_where) {
    /* everything from y; the condition takes x's shape */
    mxc_shape in[3] = {{0}, {0}, shp(2, 3, 4, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("where", MXCT_NO_PARAMS, in, 3, &out, 1), MXC_OK);
    mxct_expect_shape(&in[0], (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "where condition from y");
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "where x from y");
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "where output");
    /* from the output; a 1-D condition is kept */
    mxc_shape in1[3] = {shp(1, 3, 0, 0, 0), {0}, {0}};
    out = shp(2, 3, 4, 0, 0);
    ck_assert_int_eq(mxct_op_infer("where", MXCT_NO_PARAMS, in1, 3, &out, 1), MXC_OK);
    mxct_expect_shape(&in1[0], (mxc_shape[]){shp(1, 3, 0, 0, 0)}, "where 1-D condition");
    mxct_expect_shape(&in1[2], (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "where y from output");
    /* nothing known: nothing deduced */
    mxc_shape none[3] = {{0}}, no = {0};
    ck_assert_int_eq(mxct_op_infer("where", MXCT_NO_PARAMS, none, 3, &no, 1), MXC_OK);
    ck_assert_int_eq(no.ndim, 0);
    /* conflicts */
    mxc_shape bad[3] = {shp(1, 4, 0, 0, 0), shp(2, 3, 4, 0, 0), {0}};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("where", MXCT_NO_PARAMS, bad, 3, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "condition", "(4)", "(3, 4)"));
    mxc_shape bad2[3] = {shp(2, 3, 3, 0, 0), shp(2, 3, 4, 0, 0), {0}};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("where", MXCT_NO_PARAMS, bad2, 3, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "(3, 3)"));
    mxc_shape bad3[3] = {{0}, shp(2, 3, 4, 0, 0), shp(2, 4, 3, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("where", MXCT_NO_PARAMS, bad3, 3, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "x", "(3, 4)", "(4, 3)"));
}
END_TEST

START_TEST(test_shape_take_pick_one_hot) {
    /* take: indices' axes replace the taken axis */
    mxc_shape in[2] = {shp(3, 2, 5, 3, 0), shp(2, 4, 1, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("take", MXCT_KV("axis", "-2"), in, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 4, 1, 3)}, "take output");
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("take", MXCT_KV("axis", "3"), in, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("take", "axis=3", "(2, 5, 3)"));
    mxc_shape empty[2] = {shp(2, 0, 3, 0, 0), shp(1, 2, 0, 0, 0)};
    mxct_expect_error(mxct_op_infer("take", MXCT_NO_PARAMS, empty, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("take", "empty", "(0, 3)"));
    int64_t seven[7] = {1, 1, 1, 1, 1, 1, 2};
    mxc_shape deep[2] = {shp(3, 2, 3, 4, 0), mxc_shape_make(7, seven)};
    mxct_expect_error(mxct_op_infer("take", MXCT_NO_PARAMS, deep, 2, &out, 1), MXC_ENOTSUP,
                      MXCT_NEEDLES("take", "8 axes"));
    mxc_shape given = shp(2, 9, 9, 0, 0);
    mxct_expect_error(mxct_op_infer("take", MXCT_NO_PARAMS, in, 2, &given, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("take", "output", "(9, 9)"));
    mxc_shape unknown[2] = {shp(2, 2, 3, 0, 0), {0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("take", MXCT_NO_PARAMS, unknown, 2, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);

    /* pick: the index from data; keepdims; a 1-D result is (1,) */
    mxc_shape p[2] = {shp(3, 2, 5, 3, 0), {0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("pick", MXCT_KV("axis", "1"), p, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "pick output");
    mxct_expect_shape(&p[1], (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "pick index from data");
    mxc_shape pk[2] = {shp(3, 2, 5, 3, 0), shp(3, 2, 1, 3, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(
        mxct_op_infer("pick", MXCT_KV("axis", "1", "keepdims", "True"), pk, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 1, 3, 0)}, "pick output, keepdims");
    mxc_shape p1[2] = {shp(1, 5, 0, 0, 0), {0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("pick", MXCT_KV("axis", "0"), p1, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(1, 1, 0, 0, 0)}, "pick of a vector");
    mxc_shape pb[2] = {shp(2, 4, 5, 0, 0), shp(1, 5, 0, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("pick", MXCT_NO_PARAMS, pb, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("pick", "index", "(5)", "(4, 5)", "(4)"));
    mxct_expect_error(mxct_op_infer("pick", MXCT_KV("axis", "None"), pb, 2, &out, 1), MXC_ENOTSUP,
                      MXCT_NEEDLES("pick", "axis=None"));
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("pick", MXCT_KV("axis", "2"), pb, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("pick", "axis=2", "(4, 5)"));
    mxct_expect_error(mxct_op_infer("pick", MXCT_KV("axis", "0.5"), pb, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("pick", "axis=0.5"));
    mxct_expect_error(mxct_op_infer("pick", MXCT_KV("mode", "raise"), pb, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("pick", "mode", "wrap"));
    mxc_shape pe[2] = {shp(2, 3, 0, 0, 0), {0}};
    mxct_expect_error(mxct_op_infer("pick", MXCT_NO_PARAMS, pe, 2, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("pick", "empty", "(3, 0)"));

    /* one_hot: both ways */
    mxc_shape oh = {0}, oo = shp(3, 2, 3, 5, 0);
    ck_assert_int_eq(mxct_op_infer("one_hot", MXCT_KV("depth", "5"), &oh, 1, &oo, 1), MXC_OK);
    mxct_expect_shape(&oh, (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "one_hot indices from output");
    oh = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("one_hot", MXCT_KV("depth", "4"), &oh, 1, &oo, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("one_hot", "(2, 3, 5)", "depth=4"));
    oh = shp(1, 6, 0, 0, 0);
    oo = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("one_hot", MXCT_KV("depth", "5"), &oh, 1, &oo, 1), MXC_OK);
    mxct_expect_shape(&oo, (mxc_shape[]){shp(2, 6, 5, 0, 0)}, "one_hot output");
    oo = (mxc_shape){0};
    mxct_expect_error(
        mxct_op_infer("one_hot", MXCT_KV("depth", "5", "dtype", "int32"), &oh, 1, &oo, 1),
        MXC_ENOTSUP, MXCT_NEEDLES("one_hot", "int32", "float32"));
    mxct_expect_error(mxct_op_infer("one_hot", MXCT_KV("depth", "0"), &oh, 1, &oo, 1), MXC_EINVAL,
                      MXCT_NEEDLES("one_hot", "depth"));
    mxct_expect_error(mxct_op_infer("one_hot", MXCT_NO_PARAMS, &oh, 1, &oo, 1), MXC_EINVAL,
                      MXCT_NEEDLES("one_hot", "depth"));
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    oh = mxc_shape_make(8, eight);
    mxct_expect_error(mxct_op_infer("one_hot", MXCT_KV("depth", "5"), &oh, 1, &oo, 1), MXC_ENOTSUP,
                      MXCT_NEEDLES("one_hot", "8 axes"));
}
END_TEST

START_TEST(test_shape_arg) {
    mxc_shape in = shp(3, 2, 3, 4, 0), out = {0};
    ck_assert_int_eq(mxct_op_infer("argmax", MXCT_KV("axis", "-1"), &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 2, 3, 0, 0)}, "argmax output");
    out = (mxc_shape){0};
    ck_assert_int_eq(
        mxct_op_infer("argmin", MXCT_KV("axis", "1", "keepdims", "True"), &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 1, 4, 0)}, "argmin output, keepdims");
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("argmax", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(1, 1, 0, 0, 0)}, "argmax of everything");
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("argmax_channel", MXCT_NO_PARAMS, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 2, 4, 0, 0)}, "argmax_channel output");
    out = (mxc_shape){0};
    mxc_shape vec = shp(1, 5, 0, 0, 0);
    ck_assert_int_eq(mxct_op_infer("argmax", MXCT_KV("axis", "0"), &vec, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(1, 1, 0, 0, 0)}, "argmax of a vector");
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("argmax_channel", MXCT_NO_PARAMS, &vec, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("argmax_channel", "(5)", "axis 1"));
    mxct_expect_error(mxct_op_infer("argmax", MXCT_KV("axis", "3"), &in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmax", "axis=3", "(2, 3, 4)", "[-3, 2]"));
    mxct_expect_error(mxct_op_infer("argmin", MXCT_KV("axis", "-4"), &in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmin", "axis=-4"));
    mxct_expect_error(mxct_op_infer("argmin", MXCT_KV("axis", "x"), &in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmin", "axis"));
    mxct_expect_error(mxct_op_infer("argmax", MXCT_KV("keepdims", "maybe"), &in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("argmax", "keepdims"));
    /* empty: an empty axis has no extreme, unless nothing is asked */
    mxc_shape e = shp(2, 3, 0, 0, 0), z = shp(2, 0, 3, 0, 0);
    mxct_expect_error(mxct_op_infer("argmax", MXCT_KV("axis", "1"), &e, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmax", "axis 1", "(3, 0)", "empty"));
    mxct_expect_error(mxct_op_infer("argmin", MXCT_NO_PARAMS, &e, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmin", "(3, 0)", "empty"));
    mxct_expect_error(mxct_op_infer("argmax_channel", MXCT_NO_PARAMS, &e, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("argmax_channel", "(3, 0)", "empty"));
    ck_assert_int_eq(mxct_op_infer("argmax", MXCT_KV("axis", "1"), &z, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(1, 0, 0, 0, 0)}, "argmax of an empty batch");
}
END_TEST

/* argmax and argmin give a zero gradient (MXNet's), written and added; argmax_channel is
 * not differentiable, as in MXNet: a gradient through it is refused at bind. */
START_TEST(test_arg_gradients) {
    struct mxct_tensor in = mxct_tensor_random(shp(2, 3, 4, 0, 0), -1, 1, 7);
    struct mxct_tensor head = mxct_tensor_random(shp(1, 3, 0, 0, 0), -1, 1, 8), g[1];
    const float zeros[12] = {0};
    mxct_op_bound_grads("argmax", MXCT_KV("axis", "1"), &in, 1, NULL, 0,
                        (const int[]){MXC_GRAD_WRITE}, &head, g);
    mxct_expect_close(&g[0], zeros, 0, 0, "argmax gradient");
    mxct_tensors_free(g, 1);
    struct mxct_tensor h2 = mxct_tensor_random(shp(1, 4, 0, 0, 0), -1, 1, 9);
    mxct_op_bound_grads("argmin", MXCT_KV("axis", "0"), &in, 1, NULL, 0,
                        (const int[]){MXC_GRAD_ADD}, &h2, g);
    /* added onto the gradient array's start, a copy of the argument */
    mxct_expect_close(&g[0], in.data, 0, 0, "argmin gradient added");
    mxct_tensors_free(g, 1);
    mxc_op_info info;
    CK_OK(mxc_op_get_info("argmax_channel", &info));
    ck_assert(!info.differentiable);
    CK_OK(mxc_op_get_info("argmax", &info));
    ck_assert(info.differentiable);
    mxct_tensors_free(&in, 1);
    mxct_tensors_free(&head, 1);
    mxct_tensors_free(&h2, 1);
}
END_TEST

START_TEST(test_shape_sort) {
    mxc_shape in = shp(3, 2, 5, 3, 0), out[2] = {{0}, {0}};
    ck_assert_int_eq(
        mxct_op_infer("topk", MXCT_KV("axis", "1", "k", "2", "ret_typ", "both"), &in, 1, out, 2),
        MXC_OK);
    mxct_expect_shape(&out[0], (mxc_shape[]){shp(3, 2, 2, 3, 0)}, "topk values");
    mxct_expect_shape(&out[1], (mxc_shape[]){shp(3, 2, 2, 3, 0)}, "topk indices");
    mxc_shape o = {0};
    ck_assert_int_eq(mxct_op_infer("topk", MXCT_KV("ret_typ", "mask", "k", "3"), &in, 1, &o, 1),
                     MXC_OK);
    mxct_expect_shape(&o, (mxc_shape[]){in}, "topk mask");
    o = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("topk", MXCT_KV("axis", "None", "k", "7"), &in, 1, &o, 1),
                     MXC_OK);
    mxct_expect_shape(&o, (mxc_shape[]){shp(1, 7, 0, 0, 0)}, "topk of everything");
    o = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("sort", MXCT_KV("axis", "None"), &in, 1, &o, 1), MXC_OK);
    mxct_expect_shape(&o, (mxc_shape[]){shp(1, 30, 0, 0, 0)}, "sort of everything");
    o = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("argsort", MXCT_KV("axis", "0"), &in, 1, &o, 1), MXC_OK);
    mxct_expect_shape(&o, (mxc_shape[]){in}, "argsort output");
    o = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("topk", MXCT_KV("k", "4"), &in, 1, &o, 1), MXC_EINVAL,
                      MXCT_NEEDLES("topk", "k=4", "3 elements", "(2, 5, 3)"));
    mxct_expect_error(mxct_op_infer("topk", MXCT_KV("axis", "3"), &in, 1, &o, 1), MXC_EINVAL,
                      MXCT_NEEDLES("topk", "axis=3"));
    mxct_expect_error(mxct_op_infer("topk", MXCT_KV("dtype", "int32"), &in, 1, &o, 1), MXC_ENOTSUP,
                      MXCT_NEEDLES("topk", "int32", "float32"));
    mxct_expect_error(mxct_op_infer("argsort", MXCT_KV("dtype", "float64"), &in, 1, &o, 1),
                      MXC_ENOTSUP, MXCT_NEEDLES("argsort", "float64"));
    mxct_expect_error(mxct_op_infer("topk", MXCT_KV("ret_typ", "values"), &in, 1, &o, 1),
                      MXC_EINVAL, MXCT_NEEDLES("topk", "ret_typ", "value"));
    mxct_expect_error(mxct_op_infer("sort", MXCT_KV("dtype", "float32"), &in, 1, &o, 1), MXC_EINVAL,
                      MXCT_NEEDLES("sort", "dtype", "is_ascend"));
    mxct_expect_error(mxct_op_infer("sort", MXCT_KV("is_ascend", "up"), &in, 1, &o, 1), MXC_EINVAL,
                      MXCT_NEEDLES("sort", "is_ascend"));
    mxc_shape given = shp(2, 2, 5, 0, 0);
    mxct_expect_error(mxct_op_infer("sort", MXCT_NO_PARAMS, &in, 1, &given, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("sort", "output", "(2, 5)"));
}
END_TEST

/* Defaults as MXNet 1.9.1 spells them. */
START_TEST(test_params) {
    static const struct {
        const char *op, *key, *want;
    } rows[] = {
        {"take", "axis", "0"},
        {"take", "mode", "clip"},
        {"pick", "axis", "-1"},
        {"pick", "keepdims", "False"},
        {"pick", "mode", "clip"},
        {"argmax", "axis", "None"},
        {"argmin", "keepdims", "False"},
        {"topk", "axis", "-1"},
        {"topk", "k", "1"},
        {"topk", "ret_typ", "indices"},
        {"topk", "is_ascend", "False"},
        {"topk", "dtype", "float32"},
        {"sort", "axis", "-1"},
        {"sort", "is_ascend", "True"},
        {"argsort", "is_ascend", "True"},
        {"argsort", "dtype", "float32"},
        {"one_hot", "on_value", "1"},
        {"one_hot", "off_value", "0"},
        {"one_hot", "dtype", "float32"},
    };
    for (size_t r = 0; r < MXC_ARRAY_SIZE(rows); r++) {
        const struct mxc__op_def *d = mxc__op_find(rows[r].op);
        _Alignas(16) unsigned char params[256];
        struct mxct_params kv =
            strcmp(rows[r].op, "one_hot") == 0 ? MXCT_KV("depth", "2") : MXCT_NO_PARAMS;
        CK_OK(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params));
        char buf[64] = "";
        for (int i = 0; i < d->num_params; i++)
            if (strcmp(d->params[i].name, rows[r].key) == 0)
                mxc__op_format_param(&d->params[i], params, buf, sizeof buf);
        ck_assert_msg(strcmp(buf, rows[r].want) == 0, "%s.%s = '%s', expected %s", rows[r].op,
                      rows[r].key, buf, rows[r].want);
    }
    ck_assert_ptr_null(mxc__op_find("where")->params);
    ck_assert_ptr_null(mxc__op_find("argmax_channel")->params);
}
END_TEST

START_TEST(test_gather_nd) {
    mxc_shape in[2] = {shp(3, 3, 4, 2, 0), shp(3, 2, 5, 6, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("gather_nd", MXCT_NO_PARAMS, in, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 5, 6, 2, 0)}, "gather_nd slices");
    mxc_shape pt[2] = {shp(2, 2, 3, 0, 0), shp(1, 2, 0, 0, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("gather_nd", MXCT_NO_PARAMS, pt, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(1, 1, 0, 0, 0)}, "gather_nd of one element");
    mxc_shape many[2] = {shp(2, 2, 3, 0, 0), shp(2, 3, 4, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("gather_nd", MXCT_NO_PARAMS, many, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("gather_nd", "(3, 4)", "3 axes", "(2, 3)"));
    /* one element, through the kernel; a position outside its axis is refused */
    static const float x[6] = {1, 2, 3, 4, 5, 6}, at[2] = {1, -1}, bad[2] = {1, 3};
    struct mxct_tensor t[2] = {mxct_tensor_from(shp(2, 2, 3, 0, 0), x),
                               mxct_tensor_from(shp(1, 2, 0, 0, 0), at)},
                       o[1];
    CK_OK(mxct_op_forward("gather_nd", MXCT_NO_PARAMS, false, t, 2, NULL, o));
    mxct_expect_close(&o[0], (const float[]){6}, 0, 0, "gather_nd [1, -1]");
    mxct_tensors_free(o, 1);
    mxct_tensors_free(&t[1], 1);
    t[1] = mxct_tensor_from(shp(1, 2, 0, 0, 0), bad);
    mxct_expect_error(mxct_op_forward("gather_nd", MXCT_NO_PARAMS, false, t, 2, NULL, o),
                      MXC_EINVAL, MXCT_NEEDLES("gather_nd", "index 3", "axis 1", "size 3"));
    mxct_tensors_free(o, 1);
    mxct_tensors_free(t, 2);
}
END_TEST

/* take with mode=raise refuses an index outside [0, n - 1] when it runs (MXNet's test: 2.5
 * passes for 3 rows, 3.5 does not for 4 though it truncates to 3). */
START_TEST(test_take_raise) {
    static const float bad[] = {0, 3.5f}, neg[] = {-0.5f}, ok[] = {2.5f, 0};
    struct mxct_tensor in[2] = {mxct_tensor_random(shp(2, 4, 2, 0, 0), -1, 1, 5),
                                mxct_tensor_from(shp(1, 2, 0, 0, 0), bad)},
                       out[1];
    struct mxct_params raise = MXCT_KV("mode", "raise");
    mxct_expect_error(mxct_op_forward("take", raise, false, in, 2, NULL, out), MXC_EINVAL,
                      MXCT_NEEDLES("take", "3.5 (at 1)", "[0, 3]", "raise"));
    mxct_tensors_free(out, 1); /* the kernel failed: the output was made before */
    mxct_tensors_free(&in[1], 1);
    in[1] = mxct_tensor_from(shp(1, 1, 0, 0, 0), neg);
    mxct_expect_error(mxct_op_forward("take", raise, false, in, 2, NULL, out), MXC_EINVAL,
                      MXCT_NEEDLES("take", "-0.5"));
    mxct_tensors_free(out, 1);
    mxct_tensors_free(&in[1], 1);
    in[1] = mxct_tensor_from(shp(1, 2, 0, 0, 0), ok);
    CK_OK(mxct_op_forward("take", raise, false, in, 2, NULL, out));
    const float *d = in[0].data, want[4] = {d[4], d[5], d[0], d[1]};
    mxct_expect_close(&out[0], want, 0, 0, "take rows 2 (index 2.5) and 0");
    mxct_tensors_free(out, 1);
    mxct_tensors_free(in, 2);
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* One case of each operator through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_invoke(&r, NULL, false, 0, 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_index");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_gradient_where);
    tcase_add_test(tc, test_gradient_take_pick);
    tcase_add_test(tc, test_gradient_one_hot);
    tcase_add_test(tc, test_gradient_sort);
    tcase_add_test(tc, test_sort_nan);
    tcase_add_test(tc, test_gradient_gather_nd);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_where);
    tcase_add_test(tc, test_shape_take_pick_one_hot);
    tcase_add_test(tc, test_take_raise);
    tcase_add_test(tc, test_shape_arg);
    tcase_add_test(tc, test_arg_gradients);
    tcase_add_test(tc, test_shape_sort);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_gather_nd);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
