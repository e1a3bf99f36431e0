/*
 * tests/check_op_reduce.c — the reduce family: sum, mean, max, broadcast_add/sub/mul/div,
 * dot, batch_dot and clip. Forward values and input gradients against MXNet 1.9.1
 * references (tests/data/ops/reduce, made by scripts/gen_op_refs_reduce.py), forward
 * add-to requests, finite-difference gradient checks with write and add-to requests, shape
 * inference (deduction, conflicts, bad axes), parameter tables (defaults, bounds, missing
 * keys) and one run of each operator through mxc_imperative_invoke and the engine.
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

static mxc_shape shp(int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d};
    return mxc_shape_make(ndim, dims);
}

/* ---- Reference cases (parameters as in scripts/gen_op_refs_reduce.py) ---------------- */

struct ref_case {
    const char *file; /* tests/data/ops/reduce/<file>.params */
    const char *op;
    int num_in;
    const char *kv[8]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"sum_all", "sum", 1, {NULL}},
    {"sum_axis1_keep", "sum", 1, {"axis", "1", "keepdims", "True"}},
    {"sum_axes02", "sum", 1, {"axis", "(0, 2)"}},
    {"sum_exclude", "sum", 1, {"axis", "1", "exclude", "True"}},
    {"sum_neg", "sum", 1, {"axis", "-1"}},
    {"mean_all_keep", "mean", 1, {"keepdims", "True"}},
    {"mean_axes12", "mean", 1, {"axis", "(1, 2)"}},
    {"mean_axis0", "mean", 1, {"axis", "0"}},
    {"max_axis1", "max", 1, {"axis", "1"}},
    {"max_all", "max", 1, {NULL}},
    {"max_exclude_keep", "max", 1, {"axis", "(0, 2)", "exclude", "True", "keepdims", "True"}},
    {"max_ties", "max", 1, {"axis", "1"}},
    {"badd", "broadcast_add", 2, {NULL}},
    {"badd_same", "broadcast_add", 2, {NULL}},
    {"bsub", "broadcast_sub", 2, {NULL}},
    {"bmul_pad", "broadcast_mul", 2, {NULL}},
    {"bmul_same", "broadcast_mul", 2, {NULL}},
    {"bdiv", "broadcast_div", 2, {NULL}},
    {"bdiv_lhs", "broadcast_div", 2, {NULL}},
    {"dot_2d", "dot", 2, {NULL}},
    {"dot_t", "dot", 2, {"transpose_a", "True", "transpose_b", "True"}},
    {"dot_nd", "dot", 2, {NULL}},
    {"dot_nd_t", "dot", 2, {"transpose_a", "True", "transpose_b", "True"}},
    {"dot_vv", "dot", 2, {NULL}},
    {"dot_vm", "dot", 2, {NULL}},
    {"dot_mv_t", "dot", 2, {"transpose_a", "True"}},
    {"bdot", "batch_dot", 2, {NULL}},
    {"bdot_t", "batch_dot", 2, {"transpose_a", "True", "transpose_b", "True"}},
    {"bdot_4d", "batch_dot", 2, {"transpose_b", "True"}},
    {"clip", "clip", 1, {"a_min", "-1", "a_max", "1"}},
    {"clip_inverted", "clip", 1, {"a_min", "0.5", "a_max", "-0.5"}},
};

/* The case's file name into file (256 bytes) and its inputs into in. */
static void load_inputs(const struct ref_case *c, char *file, struct mxct_tensor *in) {
    snprintf(file, 256, "ops/reduce/%s.params", c->file);
    mxct_ref_load_all(file, "in", c->num_in, in);
}

static struct mxc__tensor view_of(const struct mxct_tensor *t) {
    return (struct mxc__tensor){t->data, t->shape, MXC_FLOAT32, mxc_cpu(),
                                mxc_shape_size(&t->shape)};
}

/* The resources `kinds` lists, as a kernel gets them. */
static int get_res(const unsigned char *kinds, struct mxc__resource **res) {
    int n = 0;
    for (int i = 0; i < 2 && kinds[i]; i++)
        ck_assert_int_eq(mxc__resource_get(mxc_cpu(), kinds[i] - 1, &res[n++]), MXC_OK);
    return n;
}

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    return mxct_ref_case_of("reduce", c->file, c->op, c->kv, c->num_in, 1);
}

START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, false, 1e-5, 1e-5);
}
END_TEST

/* The forward kernel with an add-to request onto an output preset to 1 gives 1 + out0. */
START_TEST(test_forward_add) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    char file[256], what[128];
    struct mxct_tensor in[2];
    load_inputs(c, file, in);
    struct mxct_tensor want = mxct_ref_load(file, "out0");
    const struct mxc__op_def *def = mxc__op_find(c->op);
    ck_assert_ptr_nonnull(def);
    _Alignas(16) unsigned char params[256];
    ck_assert_int_eq(mxc__op_parse_params(def, kv.num, kv.keys, kv.vals, params), MXC_OK);
    struct mxc__resource *res[2] = {NULL, NULL};
    int nres = get_res(def->forward_resources, res);
    int64_t n = mxc_shape_size(&want.shape);
    struct mxct_tensor got = mxct_tensor_from(want.shape, NULL);
    for (int64_t i = 0; i < n; i++) {
        got.data[i] = 1.0f;
        want.data[i] += 1.0f;
    }
    struct mxc__tensor tin[2];
    for (int i = 0; i < c->num_in; i++)
        tin[i] = view_of(&in[i]);
    struct mxc__tensor tout = view_of(&got);
    int req = MXC__REQ_ADD;
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {.rctx = &rctx,
                                .params = params,
                                .in_data = tin,
                                .num_in = c->num_in,
                                .out_data = &tout,
                                .num_out = 1,
                                .req = &req,
                                .resources = res,
                                .num_resources = nres};
    ck_assert_msg(def->forward_cpu(&call) == MXC_OK, "%s", mxc_last_error());
    snprintf(what, sizeof what, "%s forward add-to", c->file);
    mxct_expect_close(&got, want.data, 1e-5, 1e-5, what);
    mxct_tensors_free(&got, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-5, 1e-5);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

enum { RANDOM, LADDER, AWAY_FROM_ONE, POSITIVE_RHS };

struct grad_case {
    const char *op;
    int num_in;
    int fill; /* how input 0 (or, POSITIVE_RHS, input 1) is filled */
    mxc_shape shapes[2];
    const char *kv[8];
};

static const struct grad_case grad_cases[] = {
    {"sum", 1, RANDOM, {{3, {2, 3, 4}}}, {NULL}},
    {"sum", 1, RANDOM, {{4, {2, 3, 4, 2}}}, {"axis", "(0, 2)", "keepdims", "True"}},
    {"sum", 1, RANDOM, {{3, {2, 3, 4}}}, {"axis", "(1,)", "exclude", "True"}},
    {"mean", 1, RANDOM, {{3, {3, 1, 4}}}, {"axis", "-1"}},
    {"mean", 1, RANDOM, {{4, {2, 3, 4, 2}}}, {"axis", "(1, 3)"}},
    {"max", 1, LADDER, {{3, {3, 4, 5}}}, {"axis", "1"}},
    {"max", 1, LADDER, {{4, {2, 3, 2, 3}}}, {"axis", "(0, 2)", "keepdims", "True"}},
    {"max", 1, LADDER, {{2, {4, 5}}}, {NULL}},
    {"broadcast_add", 2, RANDOM, {{3, {2, 3, 4}}, {3, {1, 3, 1}}}, {NULL}},
    {"broadcast_add", 2, RANDOM, {{2, {3, 4}}, {2, {3, 4}}}, {NULL}},
    {"broadcast_sub", 2, RANDOM, {{2, {3, 1}}, {2, {1, 4}}}, {NULL}},
    {"broadcast_sub", 2, RANDOM, {{1, {4}}, {3, {2, 3, 4}}}, {NULL}},
    {"broadcast_mul", 2, RANDOM, {{3, {2, 1, 3}}, {2, {4, 1}}}, {NULL}},
    {"broadcast_mul", 2, RANDOM, {{2, {3, 4}}, {2, {3, 4}}}, {NULL}},
    {"broadcast_div", 2, POSITIVE_RHS, {{3, {2, 3, 4}}, {3, {2, 1, 4}}}, {NULL}},
    {"broadcast_div", 2, POSITIVE_RHS, {{2, {1, 4}}, {2, {3, 1}}}, {NULL}},
    {"broadcast_div", 2, POSITIVE_RHS, {{2, {3, 4}}, {2, {3, 4}}}, {NULL}},
    {"dot", 2, RANDOM, {{2, {3, 4}}, {2, {4, 5}}}, {NULL}},
    {"dot", 2, RANDOM, {{2, {4, 3}}, {2, {5, 4}}}, {"transpose_a", "True", "transpose_b", "True"}},
    {"dot", 2, RANDOM, {{3, {2, 3, 4}}, {3, {4, 2, 3}}}, {NULL}},
    {"dot",
     2,
     RANDOM,
     {{3, {3, 2, 4}}, {2, {5, 3}}},
     {"transpose_a", "True", "transpose_b", "True"}},
    {"dot", 2, RANDOM, {{1, {6}}, {1, {6}}}, {NULL}},
    {"dot", 2, RANDOM, {{1, {4}}, {2, {5, 4}}}, {"transpose_b", "True"}},
    {"batch_dot", 2, RANDOM, {{3, {2, 3, 4}}, {3, {2, 4, 5}}}, {NULL}},
    {"batch_dot",
     2,
     RANDOM,
     {{3, {2, 4, 3}}, {3, {2, 5, 4}}},
     {"transpose_a", "True", "transpose_b", "True"}},
    {"batch_dot", 2, RANDOM, {{4, {2, 2, 4, 3}}, {4, {2, 2, 4, 5}}}, {"transpose_a", "True"}},
    {"clip", 1, AWAY_FROM_ONE, {{2, {4, 5}}}, {"a_min", "-1", "a_max", "1"}},
};

/* Shuffles t's elements (deterministically). */
static void shuffle(struct mxct_tensor *t) {
    int64_t m = mxc_shape_size(&t->shape);
    struct mxct_rng r;
    mxct_rng_seed(&r, 7);
    for (int64_t j = m - 1; j > 0; j--) {
        int64_t k = mxct_rng_below(&r, (uint32_t)(j + 1));
        float v = t->data[j];
        t->data[j] = t->data[k];
        t->data[k] = v;
    }
}

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = mxct_kv_split(c->kv, keys, vals, (int)MXC_ARRAY_SIZE(keys));
    struct mxct_tensor in[2];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], -1, 1, 10u + (unsigned)i);
    int64_t m = mxc_shape_size(&in[0].shape);
    if (c->fill == LADDER || c->fill == AWAY_FROM_ONE) {
        /* LADDER: steps of 0.05, no two values within 2 eps (a unique maximum);
         * AWAY_FROM_ONE: steps of 0.15 from -1.52, none within 0.03 of ±1 (clip's bounds) */
        for (int64_t j = 0; j < m; j++)
            in[0].data[j] = c->fill == LADDER ? (float)j * 0.05f : -1.52f + (float)j * 0.15f;
        shuffle(&in[0]);
    }
    if (c->fill == POSITIVE_RHS)
        for (int64_t j = 0; j < mxc_shape_size(&in[1].shape); j++)
            in[1].data[j] = 1.0f + 0.5f * in[1].data[j];
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, 0, 1e-2, 5e-2, 5e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* ---- Shape inference ------------------------------------------------------------------ */

/* out of `op` with `kv` on data `in`, expected `want` */
static void expect_reduced(const char *op, struct mxct_params kv, mxc_shape in, mxc_shape want) {
    mxc_shape out = {0};
    ck_assert_msg(mxct_op_infer(op, kv, &in, 1, &out, 1) == MXC_OK, "%s", mxc_last_error());
    mxct_expect_shape(&out, &want, op);
}

/* dot and batch_dot with one input's gradient off (MXC_GRAD_NULL: no memory), plain and
 * transposed: the backward computed a pointer into the missing gradient (NULL + batch
 * offset, undefined behaviour reported by clang's UBSan; found by tests/fuzz/op_params).
 * The other gradient is as with both on. */
START_TEST(test_dot_grad_reqs) {
    const bool batch = _i & 1, transposed = _i & 2, second_off = _i & 4;
    const char *op = batch ? "batch_dot" : "dot";
    struct mxct_params kv =
        transposed ? MXCT_KV("transpose_a", "True", "transpose_b", "True") : MXCT_NO_PARAMS;
    /* (2,) 3 x 4 times 4 x 5, or their transposes */
    mxc_shape sa = batch ? shp(3, 2, 3, 4, 0) : shp(2, 3, 4, 0, 0);
    mxc_shape sb = batch ? shp(3, 2, 4, 5, 0) : shp(2, 4, 5, 0, 0);
    if (transposed) {
        int r = sa.ndim - 1;
        int64_t t = sa.dims[r];
        sa.dims[r] = sa.dims[r - 1], sa.dims[r - 1] = t;
        t = sb.dims[r];
        sb.dims[r] = sb.dims[r - 1], sb.dims[r - 1] = t;
    }
    struct mxct_tensor in[2] = {mxct_tensor_random(sa, -1, 1, 1), mxct_tensor_random(sb, -1, 1, 2)};
    struct mxct_tensor head =
        mxct_tensor_random(batch ? shp(3, 2, 3, 5, 0) : shp(2, 3, 5, 0, 0), -1, 1, 3);
    struct mxct_tensor want[2], got[2];
    int on = second_off ? 0 : 1, off = 1 - on;
    int reqs[2] = {MXC_GRAD_WRITE, MXC_GRAD_WRITE};
    mxct_op_bound_grads(op, kv, in, 2, NULL, 0, reqs, &head, want);
    reqs[off] = MXC_GRAD_NULL;
    mxct_op_bound_grads(op, kv, in, 2, NULL, 0, reqs, &head, got);
    ck_assert_ptr_null(got[off].data);
    mxct_expect_close(&got[on], want[on].data, 0, 0, "the gradient still asked for");
    mxct_tensors_free(want, 2);
    mxct_tensors_free(got, 2);
    mxct_tensors_free(in, 2);
    mxct_tensors_free(&head, 1);
}
END_TEST

START_TEST(test_shape_reduce) {
    mxc_shape x = shp(3, 2, 3, 4, 0);
    expect_reduced("sum", MXCT_NO_PARAMS, x, shp(1, 1, 0, 0, 0));
    expect_reduced("sum", MXCT_KV("keepdims", "True"), x, shp(3, 1, 1, 1, 0));
    expect_reduced("mean", MXCT_KV("axis", "(0, 2)"), x, shp(1, 3, 0, 0, 0));
    expect_reduced("max", MXCT_KV("axis", "-1", "keepdims", "True"), x, shp(3, 2, 3, 1, 0));
    expect_reduced("sum", MXCT_KV("axis", "1", "exclude", "True"), x, shp(1, 3, 0, 0, 0));
    expect_reduced("sum", MXCT_KV("axis", "(0, 1, 2)", "exclude", "True"), x, shp(3, 2, 3, 4, 0));
    expect_reduced("sum", MXCT_KV("axis", "()", "exclude", "True"), x, shp(1, 1, 0, 0, 0));

    /* unknown data: nothing deduced, no error */
    mxc_shape unk = {0}, out = {0};
    ck_assert_int_eq(mxct_op_infer("sum", MXCT_KV("axis", "1"), &unk, 1, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);

    out = shp(2, 2, 3, 0, 0);
    mxct_expect_error(mxct_op_infer("mean", MXCT_KV("axis", "1"), &x, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("mean", "output", "(2, 3)", "(2, 4)"));
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("sum", MXCT_KV("axis", "3"), &x, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("sum", "axis 3", "(2, 3, 4)"));
    mxct_expect_error(mxct_op_infer("max", MXCT_KV("axis", "-4"), &x, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("max", "axis -4"));
    mxct_expect_error(mxct_op_infer("sum", MXCT_KV("axis", "(2, -1)"), &x, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("sum", "more than once"));
}
END_TEST

START_TEST(test_shape_broadcast) {
    mxc_shape in[2] = {shp(3, 2, 1, 3, 0), shp(2, 4, 1, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("broadcast_mul", MXCT_NO_PARAMS, in, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 2, 4, 3, 0)}, "left-padded broadcast");
    mxc_shape same[2] = {shp(2, 3, 4, 0, 0), shp(2, 3, 4, 0, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("broadcast_add", MXCT_NO_PARAMS, same, 2, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "same shapes");

    mxc_shape half[2] = {shp(2, 3, 4, 0, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("broadcast_sub", MXCT_NO_PARAMS, half, 2, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);
    ck_assert_int_eq(half[1].ndim, 0);

    mxc_shape bad[2] = {shp(2, 2, 3, 0, 0), shp(2, 4, 3, 0, 0)};
    mxct_expect_error(mxct_op_infer("broadcast_div", MXCT_NO_PARAMS, bad, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("broadcast_div", "lhs", "(2, 3)", "rhs", "(4, 3)"));
    out = shp(2, 3, 5, 0, 0);
    mxct_expect_error(mxct_op_infer("broadcast_add", MXCT_NO_PARAMS, same, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("broadcast_add", "output", "(3, 5)", "(3, 4)"));
}
END_TEST

static void expect_product(const char *op, struct mxct_params kv, mxc_shape l, mxc_shape r,
                           mxc_shape want) {
    mxc_shape in[2] = {l, r}, out = {0};
    ck_assert_msg(mxct_op_infer(op, kv, in, 2, &out, 1) == MXC_OK, "%s", mxc_last_error());
    mxct_expect_shape(&out, &want, op);
}

START_TEST(test_shape_dot) {
    struct mxct_params tt = MXCT_KV("transpose_a", "True", "transpose_b", "True");
    expect_product("dot", MXCT_NO_PARAMS, shp(2, 3, 4, 0, 0), shp(2, 4, 5, 0, 0),
                   shp(2, 3, 5, 0, 0));
    expect_product("dot", MXCT_NO_PARAMS, shp(3, 2, 3, 4, 0), shp(3, 4, 5, 6, 0),
                   shp(4, 2, 3, 5, 6));
    expect_product("dot", tt, shp(3, 3, 2, 4, 0), shp(2, 5, 3, 0, 0), shp(3, 2, 4, 5, 0));
    expect_product("dot", MXCT_NO_PARAMS, shp(1, 4, 0, 0, 0), shp(1, 4, 0, 0, 0),
                   shp(1, 1, 0, 0, 0));
    expect_product("dot", MXCT_NO_PARAMS, shp(1, 4, 0, 0, 0), shp(2, 4, 5, 0, 0),
                   shp(1, 5, 0, 0, 0));
    expect_product("batch_dot", MXCT_NO_PARAMS, shp(3, 2, 3, 4, 0), shp(3, 2, 4, 5, 0),
                   shp(3, 2, 3, 5, 0));
    expect_product("batch_dot", tt, shp(4, 2, 2, 4, 3), shp(4, 2, 2, 5, 4), shp(4, 2, 2, 3, 5));

    mxc_shape unk[2] = {shp(2, 3, 4, 0, 0)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("dot", MXCT_NO_PARAMS, unk, 2, &out, 1), MXC_OK);
    ck_assert_int_eq(out.ndim, 0);

    mxc_shape bad[2] = {shp(2, 2, 3, 0, 0), shp(2, 4, 3, 0, 0)};
    mxct_expect_error(mxct_op_infer("dot", MXCT_NO_PARAMS, bad, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("dot", "lhs (2, 3)", "rhs (4, 3)"));
    mxc_shape vv[2] = {shp(1, 4, 0, 0, 0), shp(1, 4, 0, 0, 0)};
    mxct_expect_error(mxct_op_infer("dot", MXCT_KV("transpose_a", "True"), vv, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("dot", "transpose"));
    mxc_shape b2[2] = {shp(2, 3, 4, 0, 0), shp(2, 4, 5, 0, 0)};
    mxct_expect_error(mxct_op_infer("batch_dot", MXCT_NO_PARAMS, b2, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("batch_dot", "(3, 4)", "at least 3"));
    mxc_shape bb[2] = {shp(3, 1, 3, 4, 0), shp(3, 2, 4, 5, 0)};
    mxct_expect_error(mxct_op_infer("batch_dot", MXCT_NO_PARAMS, bb, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("batch_dot", "(1, 3, 4)", "(2, 4, 5)", "batch"));
    mxc_shape bk[2] = {shp(3, 2, 3, 4, 0), shp(3, 2, 5, 5, 0)};
    mxct_expect_error(mxct_op_infer("batch_dot", MXCT_NO_PARAMS, bk, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("batch_dot", "summed axis"));
    mxc_shape good[2] = {shp(2, 3, 4, 0, 0), shp(2, 4, 5, 0, 0)};
    out = shp(2, 3, 4, 0, 0);
    mxct_expect_error(mxct_op_infer("dot", MXCT_NO_PARAMS, good, 2, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("dot", "output", "(3, 4)", "(3, 5)"));
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("dot", MXCT_KV("forward_stype", "csr"), good, 2, &out, 1),
                      MXC_ENOTSUP, MXCT_NEEDLES("forward_stype", "csr"));
}
END_TEST

START_TEST(test_shape_clip) {
    struct mxct_params kv = MXCT_KV("a_min", "0", "a_max", "1");
    mxc_shape in = shp(2, 3, 4, 0, 0), out = {0};
    ck_assert_int_eq(mxct_op_infer("clip", kv, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "clip output");
    in = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("clip", kv, &in, 1, &out, 1), MXC_OK);
    mxct_expect_shape(&in, (mxc_shape[]){shp(2, 3, 4, 0, 0)}, "clip data from output");
    in = shp(2, 3, 5, 0, 0);
    mxct_expect_error(mxct_op_infer("clip", kv, &in, 1, &out, 1), MXC_ESHAPE,
                      MXCT_NEEDLES("clip", "(3, 5)", "(3, 4)"));
}
END_TEST

/* ---- Parameters ------------------------------------------------------------------------ */

START_TEST(test_params) {
    static const char *const reducers[] = {"sum", "mean", "max"};
    for (int i = 0; i < 3; i++) {
        mxct_expect_param(reducers[i], MXCT_NO_PARAMS, "axis", "()");
        mxct_expect_param(reducers[i], MXCT_NO_PARAMS, "keepdims", "False");
        mxct_expect_param(reducers[i], MXCT_NO_PARAMS, "exclude", "False");
    }
    mxct_expect_param("sum", MXCT_KV("axis", "(0, -1)"), "axis", "(0, -1)");
    mxct_expect_param("sum", MXCT_KV("axis", "2"), "axis", "(2,)");
    mxct_expect_param("dot", MXCT_NO_PARAMS, "transpose_a", "False");
    mxct_expect_param("dot", MXCT_NO_PARAMS, "transpose_b", "False");
    mxct_expect_param("dot", MXCT_NO_PARAMS, "forward_stype", "None");
    mxct_expect_param("batch_dot", MXCT_KV("transpose_b", "True"), "transpose_b", "True");
    mxct_expect_param("clip", MXCT_KV("a_min", "-1.5", "a_max", "2"), "a_min", "-1.5");
    const struct mxc__op_def *d = mxct_op_def("broadcast_add");
    ck_assert_int_eq(d->num_params, 0);

    mxc_shape in[2] = {{0}}, out = {0};
    mxct_expect_error(mxct_op_infer("clip", MXCT_KV("a_max", "1"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("clip", "a_min"));
    mxct_expect_error(mxct_op_infer("clip", MXCT_KV("a_min", "1"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("clip", "a_max"));
    mxct_expect_error(mxct_op_infer("clip", MXCT_KV("a_min", "x", "a_max", "1"), in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("a_min"));
    mxct_expect_error(mxct_op_infer("sum", MXCT_KV("axes", "1"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("axes", "keepdims"));
    mxct_expect_error(mxct_op_infer("sum", MXCT_KV("axis", "(1, x)"), in, 1, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("axis"));
    mxct_expect_error(mxct_op_infer("dot", MXCT_KV("transpose_a", "maybe"), in, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("transpose_a"));
    mxct_expect_error(mxct_op_infer("dot", MXCT_KV("forward_stype", "dense"), in, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("forward_stype", "row_sparse"));
    mxct_expect_error(mxct_op_infer("broadcast_mul", MXCT_KV("scalar", "1"), in, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("scalar"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* One reference case per operator through mxc_imperative_invoke. */
static const char *const invoke_picks[] = {
    "sum_axes02", "mean_axes12", "max_exclude_keep", "badd",    "bsub",
    "bmul_pad",   "bdiv",        "dot_nd_t",         "bdot_4d", "clip"};

START_TEST(test_invoke) {
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, invoke_picks[_i]) != 0)
        c++;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, false, 1e-5, 1e-5);
}
END_TEST

/* A shape error through the engine is a status and a message, not a crash. */
START_TEST(test_invoke_error) {
    struct mxct_tensor a = mxct_tensor_from(shp(2, 2, 3, 0, 0), NULL);
    struct mxct_tensor b = mxct_tensor_from(shp(2, 4, 3, 0, 0), NULL);
    mxc_ndarray *arrays[2] = {mxct_array_of(&a), mxct_array_of(&b)}, *out[1] = {NULL};
    int rc = mxc_imperative_invoke("dot", 0, NULL, NULL, 2, arrays, 1, out, 0);
    ck_assert_int_eq(rc, MXC_ESHAPE);
    ck_assert_msg(strstr(mxc_last_error(), "(4, 3)"), "%s", mxc_last_error());
    ck_assert_ptr_null(out[0]);
    rc = mxc_imperative_invoke("broadcast_add", 0, NULL, NULL, 2, arrays, 1, out, 0);
    ck_assert_int_eq(rc, MXC_ESHAPE);
    ck_assert_ptr_null(out[0]);
    mxc_nd_free(arrays[0]);
    mxc_nd_free(arrays[1]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(&a, 1);
    mxct_tensors_free(&b, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_reduce");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_forward_add, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    tcase_add_loop_test(tc, test_dot_grad_reqs, 0, 8);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_reduce);
    tcase_add_test(tc, test_shape_broadcast);
    tcase_add_test(tc, test_shape_dot);
    tcase_add_test(tc, test_shape_clip);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, (int)MXC_ARRAY_SIZE(invoke_picks));
    tcase_add_test(tc, test_invoke_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
