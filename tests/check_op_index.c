/*
 * tests/check_op_index.c — the indexing, selection and sorting family: where, take, pick,
 * one_hot, argmax, argmin, argmax_channel, topk, sort and argsort. Output shapes, forward
 * values and input gradients against MXNet 1.9.1 references (tests/data/ops/index, made
 * by scripts/gen_op_refs_index.py: ties, NaN, out-of-range and fractional indices under
 * clip and wrap, negative axes), finite-difference gradient checks with write and add-to
 * requests where the output is differentiable in the data, shape inference both ways and
 * its conflicts, parameter tables (defaults, bounds, unsupported values) and runs through
 * mxc_imperative_invoke and the engine.
 */
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
    bool no_backward; /* MXNet does not differentiate it */
    const char *kv[8];
};

static const struct ref_case ref_cases[] = {
    {"where_same", "where", 3, 1, false, {NULL}},
    {"where_1d", "where", 3, 1, false, {NULL}},
};

/* The arrays `prefix`0 .. `prefix`{n-1} of the case's file. */
static void load_all(const struct ref_case *c, const char *prefix, int n, struct mxct_tensor *t) {
    char file[256];
    snprintf(file, sizeof file, "ops/index/%s.params", c->file);
    mxct_ref_load_all(file, prefix, n, t);
}

static struct mxct_params case_params(const struct ref_case *c, const char **keys,
                                      const char **vals) {
    return mxct_kv_split(c->kv, keys, vals, 4);
}

/* Output shapes (MXNet's shape inference) and values: selections are exact. */
START_TEST(test_forward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = case_params(c, keys, vals);
    struct mxct_tensor in[MAX_IO], out[MAX_IO], want[MAX_IO];
    char what[128];
    load_all(c, "in", c->num_in, in);
    load_all(c, "out", c->num_out, want);
    int rc = mxct_op_forward(c->op, kv, false, in, c->num_in, NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    for (int k = 0; k < c->num_out; k++) {
        snprintf(what, sizeof what, "%s output %d shape vs MXNet", c->file, k);
        mxct_expect_shape(&out[k].shape, want[k].shape, what);
        snprintf(what, sizeof what, "%s output %d vs MXNet", c->file, k);
        mxct_expect_close(&out[k], want[k].data, 0, 0, what);
    }
    mxct_tensors_free(out, c->num_out);
    mxct_tensors_free(want, c->num_out);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* The backward with out_grad = og*, each input gradient against MXNet's (zeros for
 * indices and conditions); sums of scattered gradients may round differently. */
START_TEST(test_backward_reference) {
    const struct ref_case *c = &ref_cases[_i];
    if (c->no_backward) {
        mxc_op_info info;
        CK_OK(mxc_op_get_info(c->op, &info));
        ck_assert_msg(!info.differentiable, "%s is differentiable; MXNet's is not", c->op);
        return;
    }
    const char *keys[4], *vals[4];
    struct mxct_params kv = case_params(c, keys, vals);
    struct mxct_tensor in[MAX_IO], og[MAX_IO], grads[MAX_IO], want[MAX_IO];
    char what[128];
    load_all(c, "in", c->num_in, in);
    load_all(c, "og", c->num_out, og);
    load_all(c, "grad", c->num_in, want);
    int rc = mxct_op_backward(c->op, kv, true, in, c->num_in, NULL, og, grads);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    for (int i = 0; i < c->num_in; i++) {
        snprintf(what, sizeof what, "%s gradient of input %d vs MXNet", c->file, i);
        mxct_expect_close(&grads[i], want[i].data, 1e-6, 1e-6, what);
    }
    mxct_tensors_free(grads, c->num_in);
    mxct_tensors_free(want, c->num_in);
    mxct_tensors_free(og, c->num_out);
    mxct_tensors_free(in, c->num_in);
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

/* ---- Shape inference ----------------------------------------------------------------- */

static int infer(const char *op, struct mxct_params kv, mxc_shape *in, int num_in, mxc_shape *out) {
    return mxct_op_infer(op, kv, in, num_in, out, 1);
}

START_TEST(test_shape_where) {
    /* everything from y; the condition takes x's shape */
    mxc_shape in[3] = {{0}, {0}, shp(2, 3, 4, 0, 0)}, out = {0};
    ck_assert_int_eq(infer("where", MXCT_NO_PARAMS, in, 3, &out), MXC_OK);
    mxct_expect_shape(&in[0], shp(2, 3, 4, 0, 0), "where condition from y");
    mxct_expect_shape(&in[1], shp(2, 3, 4, 0, 0), "where x from y");
    mxct_expect_shape(&out, shp(2, 3, 4, 0, 0), "where output");
    /* from the output; a 1-D condition is kept */
    mxc_shape in1[3] = {shp(1, 3, 0, 0, 0), {0}, {0}};
    out = shp(2, 3, 4, 0, 0);
    ck_assert_int_eq(infer("where", MXCT_NO_PARAMS, in1, 3, &out), MXC_OK);
    mxct_expect_shape(&in1[0], shp(1, 3, 0, 0, 0), "where 1-D condition");
    mxct_expect_shape(&in1[2], shp(2, 3, 4, 0, 0), "where y from output");
    /* nothing known: nothing deduced */
    mxc_shape none[3] = {{0}}, no = {0};
    ck_assert_int_eq(infer("where", MXCT_NO_PARAMS, none, 3, &no), MXC_OK);
    ck_assert_int_eq(no.ndim, 0);
    /* conflicts */
    mxc_shape bad[3] = {shp(1, 4, 0, 0, 0), shp(2, 3, 4, 0, 0), {0}};
    out = (mxc_shape){0};
    mxct_expect_error(infer("where", MXCT_NO_PARAMS, bad, 3, &out), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "condition", "(4)", "(3, 4)"));
    mxc_shape bad2[3] = {shp(2, 3, 3, 0, 0), shp(2, 3, 4, 0, 0), {0}};
    out = (mxc_shape){0};
    mxct_expect_error(infer("where", MXCT_NO_PARAMS, bad2, 3, &out), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "(3, 3)"));
    mxc_shape bad3[3] = {{0}, shp(2, 3, 4, 0, 0), shp(2, 4, 3, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(infer("where", MXCT_NO_PARAMS, bad3, 3, &out), MXC_ESHAPE,
                      MXCT_NEEDLES("where", "x", "(3, 4)", "(4, 3)"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* One case of each operator through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    const struct ref_case *c = &ref_cases[_i];
    const char *keys[4], *vals[4];
    struct mxct_params kv = case_params(c, keys, vals);
    struct mxct_tensor in[MAX_IO], want[MAX_IO];
    char what[128];
    load_all(c, "in", c->num_in, in);
    load_all(c, "out", c->num_out, want);
    mxc_ndarray *arrays[MAX_IO], *out[MAX_IO] = {NULL};
    for (int i = 0; i < c->num_in; i++)
        arrays[i] = mxct_array_of(&in[i]);
    int rc = mxc_imperative_invoke(c->op, kv.num, kv.keys, kv.vals, c->num_in, arrays, c->num_out,
                                   out, 0);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->op, mxc_last_error());
    for (int k = 0; k < c->num_out; k++) {
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(out[k], &s));
        snprintf(what, sizeof what, "%s output %d through mxc_imperative_invoke", c->file, k);
        mxct_expect_shape(&s, want[k].shape, what);
        struct mxct_tensor got = mxct_tensor_from(s, NULL);
        CK_OK(mxc_nd_sync_copy_to_cpu(out[k], got.data, (size_t)mxc_shape_size(&s) * 4));
        mxct_expect_close(&got, want[k].data, 0, 0, what);
        mxct_tensors_free(&got, 1);
        mxc_nd_free(out[k]);
    }
    for (int i = 0; i < c->num_in; i++)
        mxc_nd_free(arrays[i]);
    CK_OK(mxc_nd_wait_all());
    mxct_tensors_free(want, c->num_out);
    mxct_tensors_free(in, c->num_in);
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
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_where);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
