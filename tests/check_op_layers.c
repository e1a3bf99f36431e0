/*
 * tests/check_op_layers.c — the neural-network layer family: FullyConnected,
 * Convolution, Deconvolution and Pooling. Forward values and input gradients against
 * MXNet 1.9.1 references (tests/data/ops/layers, made by scripts/gen_op_refs_layers.py),
 * finite-difference gradient checks with write and add-to requests, shape inference
 * (deduction both ways where natural, conflicts, unsupported configurations), parameter
 * tables (defaults, bounds, missing keys) and one run of each through
 * mxc_imperative_invoke and the engine.
 */
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

/* ---- Reference cases (parameters as in scripts/gen_op_refs_layers.py) --------------- */

struct ref_case {
    const char *file; /* tests/data/ops/layers/<file>.params */
    const char *op;
    int num_in;
    const char *kv[16]; /* key, value, ..., NULL */
};

static const struct ref_case ref_cases[] = {
    {"fc_basic", "FullyConnected", 3, {"num_hidden", "5"}},
    {"fc_flatten4d", "FullyConnected", 3, {"num_hidden", "4"}},
    {"fc_noflatten_nobias",
     "FullyConnected",
     2,
     {"num_hidden", "3", "no_bias", "True", "flatten", "False"}},
    {"conv_basic",
     "Convolution",
     3,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "num_filter", "4"}},
    /* workspace 0: one image per product (the other code path), same results */
    {"conv_basic",
     "Convolution",
     3,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "num_filter", "4", "workspace",
      "0"}},
    {"conv_group",
     "Convolution",
     3,
     {"kernel", "(3, 3)", "pad", "(1, 1)", "num_filter", "6", "num_group", "3"}},
    {"conv_dilate",
     "Convolution",
     2,
     {"kernel", "(3, 3)", "dilate", "(2, 2)", "num_filter", "3", "no_bias", "True"}},
    {"conv_rect",
     "Convolution",
     3,
     {"kernel", "(2, 3)", "stride", "(1, 2)", "pad", "(0, 1)", "num_filter", "2"}},
    {"conv_1d",
     "Convolution",
     3,
     {"kernel", "(3,)", "stride", "(2,)", "pad", "(1,)", "num_filter", "4"}},
    {"deconv_basic",
     "Deconvolution",
     3,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "adj", "(1, 1)", "num_filter", "4",
      "no_bias", "False"}},
    {"deconv_basic",
     "Deconvolution",
     3,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "adj", "(1, 1)", "num_filter", "4",
      "no_bias", "False", "workspace", "0"}},
    {"deconv_group", "Deconvolution", 2, {"kernel", "(3, 3)", "num_filter", "2", "num_group", "2"}},
    {"deconv_target",
     "Deconvolution",
     2,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "target_shape", "(8, 8)", "num_filter", "2"}},
    {"deconv_dilate",
     "Deconvolution",
     3,
     {"kernel", "(2, 2)", "dilate", "(2, 2)", "stride", "(2, 1)", "num_filter", "3", "no_bias",
      "False"}},
    {"pool_max", "Pooling", 1, {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)"}},
    {"pool_max_full",
     "Pooling",
     1,
     {"kernel", "(2, 2)", "stride", "(2, 2)", "pooling_convention", "full"}},
    {"pool_avg_full",
     "Pooling",
     1,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "pool_type", "avg",
      "pooling_convention", "full"}},
    {"pool_avg_nopad",
     "Pooling",
     1,
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "pool_type", "avg",
      "count_include_pad", "False"}},
    {"pool_sum", "Pooling", 1, {"kernel", "(2, 3)", "stride", "(2, 1)", "pool_type", "sum"}},
    {"pool_global_avg",
     "Pooling",
     1,
     {"kernel", "(1, 1)", "global_pool", "True", "pool_type", "avg"}},
    {"pool_global_max", "Pooling", 1, {"global_pool", "True"}},
    {"pool_1d", "Pooling", 1, {"kernel", "(3,)", "stride", "(2,)", "pad", "(1,)"}},
};

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    return mxct_ref_case_of("layers", c->file, c->op, c->kv, c->num_in, 1);
}

START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, false, 1e-5, 1e-5);
}
END_TEST

START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-5, 1e-5);
}
END_TEST

/* ---- Finite-difference gradients ----------------------------------------------------- */

struct grad_case {
    const char *op;
    int num_in;
    bool distinct; /* input 0 without near-ties (max pooling) */
    mxc_shape shapes[3];
    const char *kv[16];
};

static const struct grad_case grad_cases[] = {
    {"FullyConnected", 3, false, {{2, {3, 4}}, {2, {5, 4}}, {1, {5}}}, {"num_hidden", "5"}},
    {"FullyConnected",
     2,
     false,
     {{3, {2, 2, 3}}, {2, {4, 3}}},
     {"num_hidden", "4", "no_bias", "True", "flatten", "False"}},
    {"Convolution",
     3,
     false,
     {{4, {2, 3, 5, 5}}, {4, {4, 3, 3, 3}}, {1, {4}}},
     {"kernel", "(3, 3)", "pad", "(1, 1)", "stride", "(2, 2)", "num_filter", "4"}},
    {"Convolution",
     3,
     false,
     {{4, {2, 3, 5, 5}}, {4, {4, 3, 3, 3}}, {1, {4}}},
     {"kernel", "(3, 3)", "pad", "(1, 1)", "stride", "(2, 2)", "num_filter", "4", "workspace",
      "0"}},
    {"Convolution",
     3,
     false,
     {{4, {2, 3, 5, 5}}, {4, {6, 1, 3, 3}}, {1, {6}}},
     {"kernel", "(3, 3)", "pad", "(1, 1)", "num_filter", "6", "num_group", "3"}},
    /* 16 channels: the Winograd path (operator/conv_winograd.c) */
    {"Convolution",
     3,
     false,
     {{4, {1, 16, 4, 5}}, {4, {16, 16, 3, 3}}, {1, {16}}},
     {"kernel", "(3, 3)", "pad", "(1, 1)", "num_filter", "16"}},
    {"Convolution",
     2,
     false,
     {{4, {1, 2, 7, 6}}, {4, {2, 2, 3, 2}}},
     {"kernel", "(3, 2)", "dilate", "(2, 2)", "num_filter", "2", "no_bias", "True"}},
    {"Convolution",
     3,
     false,
     {{3, {2, 2, 7}}, {3, {3, 2, 3}}, {1, {3}}},
     {"kernel", "(3,)", "stride", "(2,)", "pad", "(1,)", "num_filter", "3"}},
    {"Deconvolution",
     3,
     false,
     {{4, {2, 3, 3, 3}}, {4, {3, 2, 3, 3}}, {1, {2}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "adj", "(1, 1)", "num_filter", "2",
      "no_bias", "False"}},
    {"Deconvolution",
     3,
     false,
     {{4, {2, 3, 3, 3}}, {4, {3, 2, 3, 3}}, {1, {2}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "num_filter", "2", "no_bias", "False", "workspace",
      "0"}},
    /* 16 channels each side at stride 1: Winograd too, the Convolution's paths swapped */
    {"Deconvolution",
     3,
     false,
     {{4, {1, 16, 4, 5}}, {4, {16, 16, 3, 3}}, {1, {16}}},
     {"kernel", "(3, 3)", "pad", "(1, 1)", "num_filter", "16", "no_bias", "False"}},
    {"Deconvolution",
     2,
     false,
     {{4, {1, 4, 3, 3}}, {4, {4, 1, 3, 3}}},
     {"kernel", "(3, 3)", "dilate", "(2, 2)", "num_filter", "2", "num_group", "2"}},
    {"Deconvolution",
     2,
     false,
     {{4, {1, 2, 3, 3}}, {4, {2, 2, 3, 3}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "target_shape", "(6, 6)", "num_filter", "2"}},
    {"Pooling",
     1,
     true,
     {{4, {2, 3, 5, 5}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)"}},
    {"Pooling",
     1,
     true,
     {{4, {2, 3, 5, 5}}},
     {"kernel", "(2, 2)", "stride", "(2, 2)", "pooling_convention", "full"}},
    {"Pooling",
     1,
     false,
     {{4, {2, 3, 5, 5}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "pool_type", "avg",
      "pooling_convention", "full"}},
    {"Pooling",
     1,
     false,
     {{4, {2, 3, 5, 5}}},
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "pool_type", "avg",
      "count_include_pad", "False"}},
    {"Pooling", 1, false, {{4, {2, 3, 5, 5}}}, {"kernel", "(2, 3)", "pool_type", "sum"}},
    {"Pooling", 1, false, {{4, {2, 3, 4, 4}}}, {"global_pool", "True", "pool_type", "avg"}},
    {"Pooling", 1, true, {{3, {2, 2, 9}}}, {"kernel", "(3,)", "stride", "(2,)"}},
    /* the branch-free max 2x2 / stride 2 path, odd height and width (an uncovered edge) */
    {"Pooling", 1, true, {{4, {2, 3, 7, 9}}}, {"kernel", "(2, 2)", "stride", "(2, 2)"}},
};

START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    const char *keys[8], *vals[8];
    int n = 0;
    for (; c->kv[2 * n]; n++) {
        keys[n] = c->kv[2 * n];
        vals[n] = c->kv[2 * n + 1];
    }
    struct mxct_params kv = {n, keys, vals};
    struct mxct_tensor in[3];
    for (int i = 0; i < c->num_in; i++)
        in[i] = mxct_tensor_random(c->shapes[i], -1, 1, 10u + (unsigned)i);
    if (c->distinct) {
        /* a shuffled ladder with steps of 0.05: no two values within 2 eps */
        int64_t m = mxc_shape_size(&in[0].shape);
        struct mxct_rng r;
        mxct_rng_seed(&r, 7);
        for (int64_t j = 0; j < m; j++)
            in[0].data[j] = (float)j * 0.05f;
        for (int64_t j = m - 1; j > 0; j--) {
            int64_t k = mxct_rng_below(&r, (uint32_t)(j + 1));
            float t = in[0].data[j];
            in[0].data[j] = in[0].data[k];
            in[0].data[k] = t;
        }
    }
    mxct_op_gradcheck(c->op, kv, true, in, c->num_in, NULL, 0, 1e-2, 5e-2, 5e-3);
    mxct_tensors_free(in, c->num_in);
}
END_TEST

/* Max 2x2 / stride 2 (LeNet's pooling, which has its own branch-free kernels) against a
 * plain loop, on values with many ties (0, 1 or 2), where the gradient must go to the
 * first maximum of each window in scan order as MXNet's does; an even-sized input, an
 * odd one whose last row and column no window covers, and rows of 6 outputs (4 vectorised,
 * 2 not). */
START_TEST(test_pool_max2x2) {
    static const mxc_shape shapes[] = {{4, {2, 3, 8, 8}}, {4, {3, 2, 7, 9}}, {4, {2, 2, 6, 13}}};
    const mxc_shape *shape = &shapes[_i];
    int64_t planes = shape->dims[0] * shape->dims[1], ih = shape->dims[2], iw = shape->dims[3];
    int64_t oh = ih / 2, ow = iw / 2;
    struct mxct_tensor x = mxct_tensor_random(*shape, 0, 3, 5);
    for (int64_t i = 0; i < planes * ih * iw; i++)
        x.data[i] = (float)(int)x.data[i];
    struct mxct_params kv = MXCT_KV("kernel", "(2, 2)", "stride", "(2, 2)");
    struct mxct_tensor y, dy, dx;
    ck_assert_int_eq(mxct_op_forward("Pooling", kv, true, &x, 1, NULL, &y), MXC_OK);
    dy = mxct_tensor_random(y.shape, -1, 1, 6);
    ck_assert_int_eq(mxct_op_backward("Pooling", kv, true, &x, 1, NULL, &dy, &dx), MXC_OK);
    float *want_y = calloc((size_t)(planes * oh * ow), sizeof(float));
    float *want_dx = calloc((size_t)(planes * ih * iw), sizeof(float));
    ck_assert(want_y && want_dx);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r = 0; r < oh; r++)
            for (int64_t c = 0; c < ow; c++) {
                const float *xp = x.data + p * ih * iw;
                int64_t at[4] = {2 * r * iw + 2 * c, 2 * r * iw + 2 * c + 1,
                                 (2 * r + 1) * iw + 2 * c, (2 * r + 1) * iw + 2 * c + 1};
                int best = 0;
                for (int k = 1; k < 4; k++)
                    if (xp[at[k]] > xp[at[best]])
                        best = k;
                int64_t o = (p * oh + r) * ow + c;
                want_y[o] = xp[at[best]];
                want_dx[p * ih * iw + at[best]] = dy.data[o];
            }
    mxct_expect_close(&y, want_y, 0, 0, "max 2x2 forward");
    mxct_expect_close(&dx, want_dx, 0, 0, "max 2x2 backward");
    free(want_y);
    free(want_dx);
    mxct_tensors_free(&x, 1);
    mxct_tensors_free(&y, 1);
    mxct_tensors_free(&dy, 1);
    mxct_tensors_free(&dx, 1);
}
END_TEST

/* ---- Shape inference ------------------------------------------------------------------ */

/* Convolution, Deconvolution and Pooling geometry whose sizes leave int64 (a dim or a
 * parameter near 2^63, e.g. data (1, 1, 2^63 - 1, 1) padded by 1): an error, where the
 * arithmetic overflowed (found by tests/fuzz/op_params). */
START_TEST(test_shape_geometry_overflow) {
    static const struct {
        const char *op;
        int num_in;
        const char *kv[8];
        int64_t dims[4];
    } cases[] = {
        {"Convolution",
         3,
         {"kernel", "(2, 3)", "num_filter", "2", "pad", "(1, 1)"},
         {1, 1, INT64_MAX, 1}},
        {"Convolution",
         3,
         {"kernel", "(2, 2)", "num_filter", "1", "dilate", "(9223372036854775807, 1)"},
         {1, 1, 3, 3}},
        {"Convolution", /* weight (1, 2, 2^61, 4): 2^64 elements */
         3,
         {"kernel", "(2305843009213693952, 4)", "num_filter", "1", "pad",
          "(1152921504606846976, 2)"},
         {1, 2, 3, 3}},
        {"Deconvolution",
         2,
         {"kernel", "(2, 2)", "num_filter", "1", "stride", "(9223372036854775807, 1)"},
         {1, 1, 3, 3}},
        {"Deconvolution",
         2,
         {"kernel", "(2, 2)", "num_filter", "1", "stride", "(3, 1)"},
         {1, 1, INT64_MAX / 2, 1}},
        {"Pooling", 1, {"kernel", "(2, 2)", "pad", "(1, 1)"}, {1, 1, INT64_MAX, 1}},
        {"Pooling", 1, {"kernel", "(2, 2)", "pad", "(9223372036854775807, 1)"}, {1, 1, 3, 3}},
    };
    for (size_t i = 0; i < MXC_ARRAY_SIZE(cases); i++) {
        const char *keys[4], *vals[4];
        int n = 0;
        for (; cases[i].kv[2 * n]; n++)
            keys[n] = cases[i].kv[2 * n], vals[n] = cases[i].kv[2 * n + 1];
        mxc_shape in[3] = {mxc_shape_make(4, cases[i].dims), {0}, {0}}, out = {0};
        int rc = mxct_op_infer(cases[i].op, (struct mxct_params){n, keys, vals}, in,
                               cases[i].num_in, &out, 1);
        ck_assert_msg(rc == MXC_ESHAPE && strstr(mxc_last_error(), "int64"), "case %zu: %s: %s", i,
                      mxc_err_name(rc), mxc_last_error());
    }
    /* Pooling's full convention rounds up without overflowing: one window per position */
    mxc_shape p[1] = {shp(4, 1, 1, 3, 3)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("Pooling",
                                   MXCT_KV("kernel", "(2, 2)", "stride", "(9223372036854775807, 1)",
                                           "pooling_convention", "full"),
                                   p, 1, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 1, 1, 2, 2)}, "pooling full with a huge stride");
}
END_TEST

START_TEST(test_shape_fc) {
    mxc_shape in[3] = {shp(4, 8, 3, 2, 2)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("FullyConnected", MXCT_KV("num_hidden", "10"), in, 3, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(2, 10, 12, 0, 0)}, "fc weight");
    mxct_expect_shape(&in[2], (mxc_shape[]){shp(1, 10, 0, 0, 0)}, "fc bias");
    mxct_expect_shape(&out, (mxc_shape[]){shp(2, 8, 10, 0, 0)}, "fc output");

    mxc_shape nf[2] = {shp(3, 8, 3, 6, 0)};
    out = (mxc_shape){0};
    ck_assert_int_eq(
        mxct_op_infer("FullyConnected",
                      MXCT_KV("num_hidden", "5", "flatten", "False", "no_bias", "True"), nf, 2,
                      &out, 1),
        MXC_OK);
    mxct_expect_shape(&nf[1], (mxc_shape[]){shp(2, 5, 6, 0, 0)}, "fc weight (no flatten)");
    mxct_expect_shape(&out, (mxc_shape[]){shp(3, 8, 3, 5, 0)}, "fc output (no flatten)");

    /* unknown data: the bias is still deduced, nothing else, no error */
    mxc_shape unk[3] = {{0}}, uo = {0};
    ck_assert_int_eq(mxct_op_infer("FullyConnected", MXCT_KV("num_hidden", "7"), unk, 3, &uo, 1),
                     MXC_OK);
    mxct_expect_shape(&unk[2], (mxc_shape[]){shp(1, 7, 0, 0, 0)}, "fc bias from params");
    ck_assert_int_eq(unk[0].ndim, 0);
    ck_assert_int_eq(uo.ndim, 0);

    mxc_shape bad[3] = {shp(2, 8, 12, 0, 0), shp(2, 10, 13, 0, 0)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("FullyConnected", MXCT_KV("num_hidden", "10"), bad, 3, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("FullyConnected", "weight", "(10, 13)", "(10, 12)"));
    mxc_shape bad_out[3] = {shp(2, 8, 12, 0, 0)};
    out = shp(2, 8, 9, 0, 0);
    mxct_expect_error(
        mxct_op_infer("FullyConnected", MXCT_KV("num_hidden", "10"), bad_out, 3, &out, 1),
        MXC_ESHAPE, MXCT_NEEDLES("output", "(8, 9)", "(8, 10)"));
}
END_TEST

START_TEST(test_shape_conv) {
    mxc_shape in[3] = {shp(4, 2, 6, 9, 9)}, out = {0};
    ck_assert_int_eq(mxct_op_infer("Convolution",
                                   MXCT_KV("kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)",
                                           "num_filter", "4", "num_group", "2"),
                                   in, 3, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(4, 4, 3, 3, 3)}, "conv weight");
    mxct_expect_shape(&in[2], (mxc_shape[]){shp(1, 4, 0, 0, 0)}, "conv bias");
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 4, 5, 5)}, "conv output");

    /* dilation: (9 + 0 - 2*(3-1) - 1) / 1 + 1 = 5 */
    mxc_shape d[2] = {shp(4, 1, 1, 9, 9)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Convolution",
                                   MXCT_KV("kernel", "(3, 3)", "dilate", "(2, 2)", "num_filter",
                                           "2", "no_bias", "True"),
                                   d, 2, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 1, 2, 5, 5)}, "dilated conv output");

    mxc_shape bad[3] = {shp(4, 2, 6, 9, 9), shp(4, 4, 6, 3, 3)};
    out = (mxc_shape){0};
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "4", "num_group", "2"), bad, 3,
                      &out, 1),
        MXC_ESHAPE, MXCT_NEEDLES("Convolution", "weight", "(4, 6, 3, 3)", "(4, 3, 3, 3)"));
    mxc_shape g[3] = {shp(4, 2, 5, 9, 9)};
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "4", "num_group", "2"), g, 3, &out,
                      1),
        MXC_EINVAL, MXCT_NEEDLES("num_group"));
    mxc_shape big[3] = {shp(4, 2, 1, 2, 2)};
    mxct_expect_error(mxct_op_infer("Convolution", MXCT_KV("kernel", "(3, 3)", "num_filter", "4"),
                                    big, 3, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("larger than the padded input"));
    mxc_shape nd[3] = {shp(3, 2, 1, 9, 0)};
    mxct_expect_error(mxct_op_infer("Convolution", MXCT_KV("kernel", "(3, 3)", "num_filter", "4"),
                                    nd, 3, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("Convolution", "(2, 1, 9)"));
    mxc_shape any[3] = {{0}};
    mxct_expect_error(mxct_op_infer("Convolution",
                                    MXCT_KV("kernel", "(3, 3, 3)", "num_filter", "4"), any, 3, &out,
                                    1),
                      MXC_ENOTSUP, MXCT_NEEDLES("3-D"));
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "4", "layout", "NHWC"), any, 3,
                      &out, 1),
        MXC_ENOTSUP, MXCT_NEEDLES("NHWC"));
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "4", "stride", "(1, 1, 1)"), any, 3,
                      &out, 1),
        MXC_EINVAL, MXCT_NEEDLES("stride"));
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "4", "stride", "(0, 1)"), any, 3,
                      &out, 1),
        MXC_EINVAL, MXCT_NEEDLES("stride[0]"));
}
END_TEST

START_TEST(test_shape_deconv) {
    /* s (H - 1) + d (k - 1) + 1 - 2p + adj = 2*3 + 3 - 2 + 1 = 8 */
    mxc_shape in[3] = {shp(4, 2, 3, 4, 4)}, out = {0};
    ck_assert_int_eq(
        mxct_op_infer("Deconvolution",
                      MXCT_KV("kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "adj",
                              "(1, 1)", "num_filter", "6", "num_group", "3", "no_bias", "False"),
                      in, 3, &out, 1),
        MXC_OK);
    mxct_expect_shape(&in[1], (mxc_shape[]){shp(4, 3, 2, 3, 3)}, "deconv weight");
    mxct_expect_shape(&in[2], (mxc_shape[]){shp(1, 6, 0, 0, 0)}, "deconv bias");
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 6, 8, 8)}, "deconv output");

    mxc_shape t[2] = {shp(4, 1, 2, 4, 4)};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Deconvolution",
                                   MXCT_KV("kernel", "(3, 3)", "stride", "(2, 2)", "target_shape",
                                           "(8, 7)", "num_filter", "2"),
                                   t, 2, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 1, 2, 8, 7)}, "deconv output (target_shape)");
    mxct_expect_error(mxct_op_infer("Deconvolution",
                                    MXCT_KV("kernel", "(3, 3)", "stride", "(2, 2)", "target_shape",
                                            "(10, 7)", "num_filter", "2"),
                                    t, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("target_shape"));
    mxc_shape a[2] = {shp(4, 1, 2, 4, 4)};
    out = (mxc_shape){0};
    mxct_expect_error(mxct_op_infer("Deconvolution",
                                    MXCT_KV("kernel", "(3, 3)", "stride", "(2, 2)", "adj", "(2, 2)",
                                            "num_filter", "2"),
                                    a, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("adj"));
}
END_TEST

START_TEST(test_shape_pool) {
    mxc_shape in[1] = {shp(4, 2, 3, 7, 7)}, out = {0};
    ck_assert_int_eq(
        mxct_op_infer("Pooling", MXCT_KV("kernel", "(2, 2)", "stride", "(2, 2)"), in, 1, &out, 1),
        MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 3, 3, 3)}, "pool valid");
    out = (mxc_shape){0};
    ck_assert_int_eq(
        mxct_op_infer("Pooling",
                      MXCT_KV("kernel", "(2, 2)", "stride", "(2, 2)", "pooling_convention", "full"),
                      in, 1, &out, 1),
        MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 3, 4, 4)}, "pool full");
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Pooling", MXCT_KV("global_pool", "True"), in, 1, &out, 1),
                     MXC_OK);
    mxct_expect_shape(&out, (mxc_shape[]){shp(4, 2, 3, 1, 1)}, "global pool");

    mxc_shape unk[1] = {{0}};
    out = (mxc_shape){0};
    ck_assert_int_eq(mxct_op_infer("Pooling", MXCT_KV("kernel", "(2, 2)"), unk, 1, &out, 1),
                     MXC_OK);
    ck_assert_int_eq(out.ndim, 0);

    out = shp(4, 2, 3, 2, 2);
    mxct_expect_error(
        mxct_op_infer("Pooling", MXCT_KV("kernel", "(2, 2)", "stride", "(2, 2)"), in, 1, &out, 1),
        MXC_ESHAPE, MXCT_NEEDLES("Pooling", "output", "(2, 3, 2, 2)", "(2, 3, 3, 3)"));
    out = (mxc_shape){0};
    mxct_expect_error(
        mxct_op_infer("Pooling", MXCT_KV("kernel", "(2, 2)", "pool_type", "lp"), in, 1, &out, 1),
        MXC_ENOTSUP, MXCT_NEEDLES("lp"));
    mxct_expect_error(mxct_op_infer("Pooling",
                                    MXCT_KV("kernel", "(2, 2)", "pooling_convention", "same"), in,
                                    1, &out, 1),
                      MXC_ENOTSUP, MXCT_NEEDLES("same"));
    mxct_expect_error(mxct_op_infer("Pooling", MXCT_KV("kernel", "(9, 9)"), in, 1, &out, 1),
                      MXC_ESHAPE, MXCT_NEEDLES("exceeds"));
    mxct_expect_error(mxct_op_infer("Pooling", MXCT_KV("stride", "(2, 2)"), in, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("kernel"));
    mxct_expect_error(
        mxct_op_infer("Pooling", MXCT_KV("kernel", "(2, 2)", "layout", "NHWC"), in, 1, &out, 1),
        MXC_ENOTSUP, MXCT_NEEDLES("NHWC"));
}
END_TEST

/* ---- Parameters ------------------------------------------------------------------------ */

START_TEST(test_params) {
    struct mxct_params fc = MXCT_KV("num_hidden", "3");
    mxct_expect_param("FullyConnected", fc, "no_bias", "False");
    mxct_expect_param("FullyConnected", fc, "flatten", "True");
    struct mxct_params cv = MXCT_KV("kernel", "(3, 3)", "num_filter", "8");
    mxct_expect_param("Convolution", cv, "stride", "()");
    mxct_expect_param("Convolution", cv, "num_group", "1");
    mxct_expect_param("Convolution", cv, "workspace", "1024");
    mxct_expect_param("Convolution", cv, "no_bias", "False");
    mxct_expect_param("Convolution", cv, "cudnn_tune", "None");
    mxct_expect_param("Convolution", cv, "layout", "None");
    mxct_expect_param("Deconvolution", cv, "no_bias", "True");
    mxct_expect_param("Deconvolution", cv, "workspace", "512");
    mxct_expect_param("Deconvolution", cv, "target_shape", "()");
    struct mxct_params pl = MXCT_NO_PARAMS;
    mxct_expect_param("Pooling", pl, "pool_type", "max");
    mxct_expect_param("Pooling", pl, "pooling_convention", "valid");
    mxct_expect_param("Pooling", pl, "global_pool", "False");
    mxct_expect_param("Pooling", pl, "p_value", "None");
    mxct_expect_param("Pooling", pl, "count_include_pad", "None");
    mxct_expect_param("Pooling", MXCT_KV("count_include_pad", "False"), "count_include_pad",
                      "False");
    mxct_expect_param("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "8", "cudnn_tune", "fastest"),
                      "cudnn_tune", "fastest");

    mxc_shape in[3] = {{0}}, out = {0};
    mxct_expect_error(mxct_op_infer("FullyConnected", MXCT_NO_PARAMS, in, 3, &out, 1), MXC_EINVAL,
                      MXCT_NEEDLES("FullyConnected", "num_hidden"));
    mxct_expect_error(mxct_op_infer("FullyConnected", MXCT_KV("num_hidden", "0"), in, 3, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("num_hidden"));
    mxct_expect_error(mxct_op_infer("Convolution", MXCT_KV("kernel", "(3, 3)"), in, 3, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("num_filter"));
    mxct_expect_error(mxct_op_infer("Convolution", MXCT_KV("num_filter", "2"), in, 3, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("kernel"));
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "2", "num_group", "0"), in, 3, &out,
                      1),
        MXC_EINVAL, MXCT_NEEDLES("num_group"));
    mxct_expect_error(
        mxct_op_infer("Convolution",
                      MXCT_KV("kernel", "(3, 3)", "num_filter", "2", "cudnn_tune", "slowest"), in,
                      3, &out, 1),
        MXC_EINVAL, MXCT_NEEDLES("cudnn_tune", "fastest"));
    mxct_expect_error(mxct_op_infer("Deconvolution",
                                    MXCT_KV("kernel", "(3, 3)", "num_filter", "2", "stride_", "1"),
                                    in, 2, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("stride_", "target_shape"));
    mxc_shape p[1] = {{0}};
    mxct_expect_error(mxct_op_infer("Pooling", MXCT_KV("pool_type", "min"), p, 1, &out, 1),
                      MXC_EINVAL, MXCT_NEEDLES("pool_type", "avg"));
    mxct_expect_error(
        mxct_op_infer("Pooling", MXCT_KV("count_include_pad", "maybe"), p, 1, &out, 1), MXC_EINVAL,
        MXCT_NEEDLES("count_include_pad"));
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* fc_basic, conv_basic, deconv_basic, pool_max through mxc_imperative_invoke. */
START_TEST(test_invoke) {
    static const char *const picks[] = {"fc_basic", "conv_basic", "deconv_basic", "pool_max"};
    const struct ref_case *c = ref_cases;
    while (strcmp(c->file, picks[_i]) != 0)
        c++;
    struct mxct_ref_case r = ref_of(c);
    mxct_ref_expect_invoke(&r, NULL, false, 1e-5, 1e-5);
    /* a wrong weight is an error naming both shapes, not a crash */
    if (c->num_in >= 2)
        mxct_ref_expect_invoke_error(&r, 1, shp(2, 1, 1, 0, 0), MXC_ESHAPE,
                                     MXCT_NEEDLES("weight", "(1, 1)"));
}
END_TEST

/* An empty batch computes nothing and takes no temp space: the column buffer of one image
 * was sized anyway, 136 TB with a pad of 188888444444 (found by tests/fuzz/op_params;
 * malloc failed, MXC_ENOMEM). The output is empty, the weight and bias gradients zero. */
/* The full convention with a stride past the input: the last row of windows lies beyond the
 * padded input, and computing where overflowed int64 for a stride of 2^63 - 1 (found by
 * tests/fuzz/op_params). Any stride past the input gives the same output as 3 does. */
START_TEST(test_pool_full_huge_stride) {
    struct mxct_tensor x = mxct_tensor_random(shp(4, 1, 1, 3, 3), -1, 1, 5), want, got;
    const char *type = _i ? "max" : "avg";
    ck_assert_int_eq(mxct_op_forward("Pooling",
                                     MXCT_KV("kernel", "(2, 2)", "stride", "(3, 1)",
                                             "pooling_convention", "full", "pool_type", type),
                                     false, &x, 1, NULL, &want),
                     MXC_OK);
    ck_assert_int_eq(
        mxct_op_forward("Pooling",
                        MXCT_KV("kernel", "(2, 2)", "stride", "(9223372036854775807, 1)",
                                "pooling_convention", "full", "pool_type", type),
                        false, &x, 1, NULL, &got),
        MXC_OK);
    mxct_expect_shape(&got.shape, (mxc_shape[]){shp(4, 1, 1, 2, 2)}, "output");
    mxct_expect_close(&got, want.data, 0, 0, type);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(&got, 1);
    mxct_tensors_free(&x, 1);
}
END_TEST

/* 3x3 convolutions at stride 1 with at least 16 channels take the Winograd path
 * (operator/conv_winograd.c) forward and for both gradients: against direct sums in
 * double, on even and odd sizes (cut edge tiles), pads 0, 1 and 2, images smaller than a
 * tile's patch, with and without bias, in a workspace that holds one slot only; and 15
 * channels or no workspace, which take im2col, the same way. */
struct conv3x3_case {
    int64_t n, c, h, w, k, ph, pw;
    bool bias;
    const char *workspace; /* MB, NULL: the default */
};

static const struct conv3x3_case conv3x3_cases[] = {
    {2, 16, 6, 6, 16, 1, 1, true, NULL}, {3, 17, 7, 9, 20, 1, 1, false, NULL},
    {1, 16, 5, 8, 16, 0, 0, true, NULL}, {2, 16, 4, 5, 18, 2, 1, true, NULL},
    {2, 32, 3, 3, 24, 1, 1, true, NULL}, {1, 16, 2, 1, 16, 1, 1, true, NULL},
    {1, 15, 6, 6, 16, 1, 1, true, NULL}, {2, 64, 16, 16, 64, 1, 1, true, "1"},
    {1, 16, 6, 6, 16, 1, 1, true, "0"},
};

START_TEST(test_conv3x3_direct_sums) {
    const struct conv3x3_case *t = &conv3x3_cases[_i];
    const int64_t oh = t->h + 2 * t->ph - 2, ow = t->w + 2 * t->pw - 2;
    char k[16], pad[32];
    snprintf(k, sizeof k, "%lld", (long long)t->k);
    snprintf(pad, sizeof pad, "(%lld, %lld)", (long long)t->ph, (long long)t->pw);
    struct mxct_params kv =
        MXCT_KV("kernel", "(3, 3)", "pad", pad, "num_filter", k, "no_bias",
                t->bias ? "False" : "True", "workspace", t->workspace ? t->workspace : "1024");
    struct mxct_tensor in[3] = {mxct_tensor_random(shp(4, t->n, t->c, t->h, t->w), -1, 1, 21),
                                mxct_tensor_random(shp(4, t->k, t->c, 3, 3), -1, 1, 22),
                                mxct_tensor_random(shp(1, t->k, 0, 0, 0), -1, 1, 23)};
    const int num_in = t->bias ? 3 : 2;
    struct mxct_tensor y, dy, grads[3];
    ck_assert_int_eq(mxct_op_forward("Convolution", kv, true, in, num_in, NULL, &y), MXC_OK);
    dy = mxct_tensor_random(y.shape, -1, 1, 24);
    ck_assert_int_eq(mxct_op_backward("Convolution", kv, true, in, num_in, NULL, &dy, grads),
                     MXC_OK);

    const int64_t ysize = t->n * t->k * oh * ow, xsize = t->n * t->c * t->h * t->w;
    const int64_t wsize = t->k * t->c * 9;
    double *want_y = calloc((size_t)ysize, sizeof(double));
    double *want_dx = calloc((size_t)xsize, sizeof(double));
    double *want_dw = calloc((size_t)wsize, sizeof(double));
    double *want_db = calloc((size_t)t->k, sizeof(double));
    ck_assert(want_y && want_dx && want_dw && want_db);
    const float *x = in[0].data, *w = in[1].data, *g = dy.data;
    for (int64_t b = 0; b < t->n; b++)
        for (int64_t o = 0; o < t->k; o++)
            for (int64_t yy = 0; yy < oh; yy++)
                for (int64_t xx = 0; xx < ow; xx++) {
                    int64_t at = ((b * t->k + o) * oh + yy) * ow + xx;
                    double sum = t->bias ? in[2].data[o] : 0.0;
                    want_db[o] += g[at];
                    for (int64_t c = 0; c < t->c; c++)
                        for (int64_t u = 0; u < 3; u++)
                            for (int64_t v = 0; v < 3; v++) {
                                int64_t iy = yy + u - t->ph, ix = xx + v - t->pw;
                                if (iy < 0 || iy >= t->h || ix < 0 || ix >= t->w)
                                    continue;
                                int64_t xi = ((b * t->c + c) * t->h + iy) * t->w + ix;
                                int64_t wi = ((o * t->c + c) * 3 + u) * 3 + v;
                                sum += (double)w[wi] * x[xi];
                                want_dx[xi] += (double)w[wi] * g[at];
                                want_dw[wi] += (double)x[xi] * g[at];
                            }
                    want_y[at] = sum;
                }
    float *fy = malloc(sizeof(float) * (size_t)ysize), *fx = malloc(sizeof(float) * (size_t)xsize);
    float *fw = malloc(sizeof(float) * (size_t)wsize), *fb = malloc(sizeof(float) * (size_t)t->k);
    ck_assert(fy && fx && fw && fb);
    for (int64_t i = 0; i < ysize; i++)
        fy[i] = (float)want_y[i];
    for (int64_t i = 0; i < xsize; i++)
        fx[i] = (float)want_dx[i];
    for (int64_t i = 0; i < wsize; i++)
        fw[i] = (float)want_dw[i];
    for (int64_t i = 0; i < t->k; i++)
        fb[i] = (float)want_db[i];
    /* sums of 9 * C products of values up to 1: a few float ulps of their magnitude */
    mxct_expect_close(&y, fy, 1e-5, 2e-5, "output");
    mxct_expect_close(&grads[0], fx, 1e-5, 2e-5, "data gradient");
    mxct_expect_close(&grads[1], fw, 1e-5, 1e-4, "weight gradient");
    if (t->bias)
        mxct_expect_close(&grads[2], fb, 1e-5, 1e-4, "bias gradient");
    free(want_y);
    free(want_dx);
    free(want_dw);
    free(want_db);
    free(fb);
    free(fy);
    free(fx);
    free(fw);
    mxct_tensors_free(grads, num_in);
    mxct_tensors_free(&dy, 1);
    mxct_tensors_free(&y, 1);
    mxct_tensors_free(in, 3);
}
END_TEST

/* Deconvolution with a 3x3 kernel at stride 1 and 16 channels or more each side runs the
 * Winograd path with its products in the other order (forward by the convolution's data
 * gradient, data gradient by its forward): the same values as im2col (workspace 0), which
 * the reference cases check against MXNet, on odd sizes and pads 0 - 2. */
static const struct conv3x3_case deconv3x3_cases[] = {
    {2, 16, 6, 6, 16, 1, 1, true, NULL},
    {3, 17, 7, 9, 20, 0, 0, false, NULL},
    {2, 16, 5, 4, 18, 2, 1, true, NULL},
    {1, 32, 2, 3, 16, 0, 1, true, NULL},
};

START_TEST(test_deconv3x3_paths_agree) {
    const struct conv3x3_case *t = &deconv3x3_cases[_i];
    char k[16], pad[32];
    snprintf(k, sizeof k, "%lld", (long long)t->k);
    snprintf(pad, sizeof pad, "(%lld, %lld)", (long long)t->ph, (long long)t->pw);
    struct mxct_tensor in[3] = {mxct_tensor_random(shp(4, t->n, t->c, t->h, t->w), -1, 1, 31),
                                mxct_tensor_random(shp(4, t->c, t->k, 3, 3), -1, 1, 32),
                                mxct_tensor_random(shp(1, t->k, 0, 0, 0), -1, 1, 33)};
    const int num_in = t->bias ? 3 : 2;
    struct mxct_tensor y[2], dy, grads[2][3];
    for (int path = 0; path < 2; path++) { /* 0: Winograd, 1: im2col */
        struct mxct_params kv =
            MXCT_KV("kernel", "(3, 3)", "pad", pad, "num_filter", k, "no_bias",
                    t->bias ? "False" : "True", "workspace", path ? "0" : "512");
        ck_assert_int_eq(mxct_op_forward("Deconvolution", kv, true, in, num_in, NULL, &y[path]),
                         MXC_OK);
        if (path == 0)
            dy = mxct_tensor_random(y[0].shape, -1, 1, 34);
        ck_assert_int_eq(
            mxct_op_backward("Deconvolution", kv, true, in, num_in, NULL, &dy, grads[path]),
            MXC_OK);
    }
    /* sums of 9 * C products of values up to 1 (the weight gradient's over the batch) */
    mxct_expect_tensor(&y[0], &y[1], 1e-5, 2e-5, "output");
    mxct_expect_tensor(&grads[0][0], &grads[1][0], 1e-5, 2e-5, "data gradient");
    mxct_expect_tensor(&grads[0][1], &grads[1][1], 1e-5, 1e-4, "weight gradient");
    if (t->bias)
        mxct_expect_tensor(&grads[0][2], &grads[1][2], 0, 0, "bias gradient");
    for (int path = 0; path < 2; path++) {
        mxct_tensors_free(grads[path], num_in);
        mxct_tensors_free(&y[path], 1);
    }
    mxct_tensors_free(&dy, 1);
    mxct_tensors_free(in, 3);
}
END_TEST

START_TEST(test_conv_empty_batch) {
    struct mxct_tensor in[3] = {mxct_tensor_from(shp(4, 0, 2, 5, 5), NULL),
                                mxct_tensor_random(shp(4, 2, 2, 3, 3), -1, 1, 3),
                                mxct_tensor_random(shp(1, 2, 0, 0, 0), -1, 1, 4)};
    struct mxct_params kv =
        MXCT_KV("kernel", "(3, 3)", "num_filter", "2", "pad", "(188888444444, 1)");
    struct mxct_tensor out[1], grads[3];
    int rc = mxct_op_forward("Convolution", kv, true, in, 3, NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s", mxc_last_error());
    mxct_expect_shape(&out[0].shape, (mxc_shape[]){shp(4, 0, 2, 377776888891, 5)},
                      "empty batch output");
    rc = mxct_op_backward("Convolution", kv, true, in, 3, NULL, out, grads);
    ck_assert_msg(rc == MXC_OK, "%s", mxc_last_error());
    for (int i = 1; i < 3; i++)
        for (int64_t k = 0; k < mxc_shape_size(&grads[i].shape); k++)
            ck_assert_float_eq(grads[i].data[k], 0.0f);
    mxct_tensors_free(grads, 3);
    mxct_tensors_free(out, 1);
    mxct_tensors_free(in, 3);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_layers");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    tcase_add_loop_test(tc, test_pool_max2x2, 0, 3);
    tcase_add_test(tc, test_conv_empty_batch);
    tcase_add_loop_test(tc, test_conv3x3_direct_sums, 0, (int)MXC_ARRAY_SIZE(conv3x3_cases));
    tcase_add_loop_test(tc, test_deconv3x3_paths_agree, 0, (int)MXC_ARRAY_SIZE(deconv3x3_cases));
    tcase_add_loop_test(tc, test_pool_full_huge_stride, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("inference");
    tcase_add_test(tc, test_shape_fc);
    tcase_add_test(tc, test_shape_conv);
    tcase_add_test(tc, test_shape_deconv);
    tcase_add_test(tc, test_shape_pool);
    tcase_add_test(tc, test_shape_geometry_overflow);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("invoke");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_invoke, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }
