/*
 * tests/check_gpu_ops.c — operators on gpu(0) against their CPU kernels on shapes the CPU
 * suites do not use: odd sizes, dimensions of size 1, and one large case per family (2 to 8
 * million elements: grid-stride loops, many blocks, long reductions). Each case runs
 * through mxct_op_backward (tests/util/op_check.c), whose backend comparison runs the
 * forward on gpu(0) and the backward through an executor bound there with write and with
 * add-to requests, comparing every output and gradient with the CPU's (the worst element
 * reported). A case whose operator has no GPU kernel fails here. Without a GPU the suite
 * returns at once and says so in one line.
 * MXC_TEST_COMPARE_ON_CPU=1 runs it with the CPU standing in for gpu(0), to test the tests.
 */
#include "mxc/op.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* How a case's inputs are filled. */
enum fill {
    ANY,      /* uniform in [-1, 1) */
    POSITIVE, /* uniform in [0.5, 2): log, sqrt, division, powers */
    CLASSES,  /* integers in [0, classes): labels, Embedding's indices */
    NEAR_ONE, /* uniform in [0.5, 1.5): BatchNorm's gamma and moving variance */
};

struct gpu_case {
    const char *op;
    const char *kv[9]; /* parameters: key, value, ..., NULL */
    int num_in;
    mxc_shape in[4];
    enum fill fill[4];
    int num_aux;
    mxc_shape aux[2];
    int classes;
    bool is_train;
};

#define S(...)     SHAPE(__VA_ARGS__)
#define LARGE_ROWS 2049 /* with 1025 columns: 2.1 M elements, neither a multiple of 32 */

static const struct gpu_case cases[] = {
    /* element-wise: odd sizes, size-1 dimensions, one large */
    {"relu", {NULL}, 1, {S(3, 1, 7)}, {ANY}, 0, {{0}}, 0, true},
    {"relu", {NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"sigmoid", {NULL}, 1, {S(1, 1, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"tanh", {NULL}, 1, {S(33, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"exp", {NULL}, 1, {S(17)}, {ANY}, 0, {{0}}, 0, true},
    {"log", {NULL}, 1, {S(5, 1, 3)}, {POSITIVE}, 0, {{0}}, 0, true},
    {"sqrt", {NULL}, 1, {S(257)}, {POSITIVE}, 0, {{0}}, 0, true},
    {"square", {NULL}, 1, {S(4097, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"abs", {NULL}, 1, {S(1, 129)}, {ANY}, 0, {{0}}, 0, true},
    {"_plus", {NULL}, 2, {S(7, 1, 3), S(7, 1, 3)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"_mul", {NULL}, 2, {S(3, 1000003), S(3, 1000003)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"_div", {NULL}, 2, {S(31, 3), S(31, 3)}, {ANY, POSITIVE}, 0, {{0}}, 0, true},
    {"_power", {NULL}, 2, {S(9, 11), S(9, 11)}, {POSITIVE, ANY}, 0, {{0}}, 0, true},
    {"_mul_scalar", {"scalar", "-2.5", NULL}, 1, {S(13, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"_rdiv_scalar", {"scalar", "3", NULL}, 1, {S(6, 7)}, {POSITIVE}, 0, {{0}}, 0, true},
    {"clip", {"a_min", "-0.5", "a_max", "0.25", NULL}, 1, {S(99)}, {ANY}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "softrelu", NULL}, 1, {S(2, 3, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"LeakyReLU", {"act_type", "elu", NULL}, 1, {S(5, 1, 9)}, {ANY}, 0, {{0}}, 0, true},
    {"LeakyReLU",
     {"act_type", "leaky", "slope", "0.1", NULL},
     1,
     {S(65)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    /* broadcasting */
    {"broadcast_add", {NULL}, 2, {S(3, 1, 5), S(1, 4, 5)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"broadcast_sub", {NULL}, 2, {S(2, 3, 4, 5), S(1, 3, 1, 5)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"broadcast_mul", {NULL}, 2, {S(7, 1), S(1, 9)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"broadcast_div", {NULL}, 2, {S(1, 1, 3), S(5, 2, 1)}, {ANY, POSITIVE}, 0, {{0}}, 0, true},
    {"broadcast_add", {NULL}, 2, {S(1001, 4097), S(1, 4097)}, {ANY, ANY}, 0, {{0}}, 0, true},
    /* reductions */
    {"sum", {"axis", "1", "keepdims", "True", NULL}, 1, {S(3, 17, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"sum", {NULL}, 1, {S(1, 1, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"sum", {"axis", "0", NULL}, 1, {S(4099, 1001)}, {ANY}, 0, {{0}}, 0, true},
    {"sum", {NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"mean", {"axis", "(0, 2)", NULL}, 1, {S(5, 3, 7, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"max", {"axis", "1", NULL}, 1, {S(9, 31)}, {ANY}, 0, {{0}}, 0, true},
    {"max", {"axis", "-1", "keepdims", "True", NULL}, 1, {S(3, 1, 2001)}, {ANY}, 0, {{0}}, 0, true},
    /* softmax */
    {"softmax", {NULL}, 1, {S(7, 13)}, {ANY}, 0, {{0}}, 0, true},
    {"softmax", {"axis", "1", NULL}, 1, {S(3, 5, 1, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"log_softmax", {NULL}, 1, {S(1, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"softmax", {NULL}, 1, {S(2047, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"SoftmaxOutput", {NULL}, 2, {S(9, 7), S(9)}, {ANY, CLASSES}, 0, {{0}}, 7, true},
    /* the normaliser counts every label that is not ignored (rank 3, several labels a row) */
    {"SoftmaxOutput",
     {"multi_output", "True", "normalization", "valid", "use_ignore", "True", "ignore_label", "1",
      NULL},
     2,
     {S(4, 5, 3), S(4, 3)},
     {ANY, CLASSES},
     0,
     {{0}},
     5,
     true},
    /* layers */
    {"FullyConnected",
     {"num_hidden", "13", NULL},
     3,
     {S(17, 33), S(13, 33), S(13)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"FullyConnected",
     {"num_hidden", "1", "no_bias", "True", NULL},
     2,
     {S(1, 5, 3, 2), S(1, 30)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"FullyConnected",
     {"num_hidden", "1001", NULL},
     3,
     {S(1025, 2049), S(1001, 2049), S(1001)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Convolution",
     {"kernel", "(3, 3)", "num_filter", "7", "stride", "(2, 1)", "pad", "(1, 0)", NULL},
     3,
     {S(3, 5, 11, 13), S(7, 5, 3, 3), S(7)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Convolution",
     {"kernel", "(1, 1)", "num_filter", "1", "no_bias", "True", NULL},
     2,
     {S(1, 3, 1, 1), S(1, 3, 1, 1)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Convolution",
     {"kernel", "(3, 3)", "num_filter", "5", "dilate", "(2, 2)", "pad", "(2, 2)", NULL},
     3,
     {S(2, 3, 9, 7), S(5, 3, 3, 3), S(5)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Convolution",
     {"kernel", "(3, 3)", "num_filter", "32", "pad", "(1, 1)", NULL},
     3,
     {S(16, 32, 67, 67), S(32, 32, 3, 3), S(32)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pool_type", "max", NULL},
     1,
     {S(2, 3, 13, 11)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(2, 3)", "pad", "(1, 1)", "pool_type", "avg", NULL},
     1,
     {S(1, 1, 5, 7)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(1, 1)", "global_pool", "True", "pool_type", "avg", NULL},
     1,
     {S(3, 4, 9, 5)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(2, 2)", "stride", "(2, 2)", "pool_type", "max", NULL},
     1,
     {S(16, 32, 129, 65)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(5, 7, 3, 3), S(7), S(7)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(7), S(7)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(9, 4), S(4), S(4)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(4), S(4)},
     0,
     false},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(32, 16, 67, 67), S(16), S(16)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(16), S(16)},
     0,
     true},
    /* shapes and lookups */
    {"Concat",
     {"num_args", "3", "dim", "1", NULL},
     3,
     {S(2, 3, 5), S(2, 1, 5), S(2, 4, 5)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Concat",
     {"num_args", "2", "dim", "0", NULL},
     2,
     {S(1001, 2049), S(1, 2049)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"transpose", {"axes", "(2, 0, 3, 1)", NULL}, 1, {S(3, 1, 5, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"transpose", {NULL}, 1, {S(7, 1, 9)}, {ANY}, 0, {{0}}, 0, true},
    {"transpose", {NULL}, 1, {S(2047, 2049)}, {ANY}, 0, {{0}}, 0, true},
    {"Embedding",
     {"input_dim", "11", "output_dim", "6", NULL},
     2,
     {S(7, 3), S(11, 6)},
     {CLASSES, ANY},
     0,
     {{0}},
     11,
     true},
    {"Embedding",
     {"input_dim", "50000", "output_dim", "64", NULL},
     2,
     {S(4099), S(50000, 64)},
     {CLASSES, ANY},
     0,
     {{0}},
     50000,
     true},
    /* indexing (operator/indexing_gpu.cu): conditions of 0 and 1, indices partly out of range */
    {"where", {NULL}, 3, {S(37, 5), S(37, 5), S(37, 5)}, {CLASSES, ANY, ANY}, 0, {{0}}, 2, true},
    {"where", {NULL}, 3, {S(37), S(37, 5, 3), S(37, 5, 3)}, {CLASSES, ANY, ANY}, 0, {{0}}, 2, true},
    {"take", {"mode", "wrap", NULL}, 2, {S(50, 7), S(33)}, {ANY, CLASSES}, 0, {{0}}, 60, true},
    {"take", {"axis", "1", NULL}, 2, {S(3, 9, 5), S(4, 2)}, {ANY, CLASSES}, 0, {{0}}, 11, true},
    {"take", {NULL}, 2, {S(2049, 1025), S(3001)}, {ANY, CLASSES}, 0, {{0}}, 2049, true},
    {"pick", {"axis", "1", NULL}, 2, {S(9, 13, 5), S(9, 5)}, {ANY, CLASSES}, 0, {{0}}, 15, true},
    {"pick",
     {"mode", "wrap", "keepdims", "True", NULL},
     2,
     {S(7, 1, 6), S(7, 1, 1)},
     {ANY, CLASSES},
     0,
     {{0}},
     9,
     true},
    {"one_hot", {"depth", "10", NULL}, 1, {S(7, 3)}, {CLASSES}, 0, {{0}}, 12, true},
    /* ties among small integers: the first occurrence on both devices */
    {"argmax", {"axis", "1", NULL}, 1, {S(7, 33, 3)}, {CLASSES}, 0, {{0}}, 4, true},
    {"argmin", {NULL}, 1, {S(1001, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"argmax_channel", {NULL}, 1, {S(9, 5)}, {CLASSES}, 0, {{0}}, 3, true},
    {"argmax", {"axis", "-1", NULL}, 1, {S(2049, 1025)}, {ANY}, 0, {{0}}, 0, true},
    /* sorting (operator/sort_gpu.cu, ranking): ties, every ret_typ, one long-row case */
    {"topk", {"k", "3", "ret_typ", "both", NULL}, 1, {S(7, 33)}, {CLASSES}, 0, {{0}}, 5, true},
    {"topk",
     {"axis", "0", "k", "2", "ret_typ", "value", "is_ascend", "True", NULL},
     1,
     {S(9, 4, 3)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"topk",
     {"axis", "1", "k", "4", "ret_typ", "mask", NULL},
     1,
     {S(3, 17, 2)},
     {CLASSES},
     0,
     {{0}},
     3,
     true},
    {"sort", {NULL}, 1, {S(5, 1, 31)}, {CLASSES}, 0, {{0}}, 7, true},
    {"argsort",
     {"axis", "None", "is_ascend", "False", NULL},
     1,
     {S(6, 7)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"topk", {"k", "10", "ret_typ", "value", NULL}, 1, {S(257, 2049)}, {ANY}, 0, {{0}}, 0, true},
    {"gather_nd", {NULL}, 2, {S(9, 7, 5), S(2, 13, 3)}, {ANY, CLASSES}, 0, {{0}}, 7, true},
};

static struct mxct_tensor filled(mxc_shape s, enum fill f, int classes, unsigned seed) {
    switch (f) {
    case POSITIVE: return mxct_tensor_random(s, 0.5f, 2.0f, seed);
    case NEAR_ONE: return mxct_tensor_random(s, 0.5f, 1.5f, seed);
    case CLASSES: {
        struct mxct_tensor t = mxct_tensor_random(s, 0, (float)classes, seed);
        for (int64_t i = 0; i < mxc_shape_size(&s); i++)
            t.data[i] = floorf(t.data[i]);
        return t;
    }
    default: return mxct_tensor_random(s, -1, 1, seed);
    }
}

START_TEST(test_gpu_matches_cpu) {
    if (!mxct_gpu_tests_run())
        return;
    const struct gpu_case *c = &cases[_i];
    ck_assert_msg(mxc_op_supports(c->op, mxct_gpu_device(), MXC_FLOAT32),
                  "%s has no GPU kernel: case %d compares nothing", c->op, _i);
    const char *kv[10] = {NULL};
    for (int k = 0; k < 9 && c->kv[k]; k++)
        kv[k] = c->kv[k];
    struct mxct_params params = kv[0] ? mxct_params_from_pairs(kv) : MXCT_NO_PARAMS;
    struct mxct_tensor in[4], aux[2], heads[4], grads[4];
    for (int i = 0; i < c->num_in; i++)
        in[i] = filled(c->in[i], c->fill[i], c->classes, 10u * (unsigned)_i + (unsigned)i);
    for (int i = 0; i < c->num_aux; i++) /* moving mean, moving variance */
        aux[i] = filled(c->aux[i], i ? NEAR_ONE : ANY, 0, 500u + (unsigned)i);
    /* the head gradients: run the forward once for the output shapes */
    struct mxct_tensor out[4];
    int rc = mxct_op_forward(c->op, params, c->is_train, in, c->num_in, aux, out);
    ck_assert_msg(rc == MXC_OK, "case %d (%s): %s", _i, c->op, mxc_last_error());
    mxc_op_info info;
    CK_OK(mxc_op_get_info(c->op, &info));
    int num_out = info.num_outputs > 0 ? info.num_outputs : 1;
    for (int k = 0; k < num_out; k++)
        heads[k] = mxct_tensor_random(out[k].shape, -1, 1, 900u + (unsigned)k);
    mxct_tensors_free(out, num_out);
    for (int i = 0; i < c->num_aux; i++) { /* the forward above updated them */
        mxct_tensors_free(&aux[i], 1);
        aux[i] = filled(c->aux[i], i ? NEAR_ONE : ANY, 0, 500u + (unsigned)i);
    }
    if (info.differentiable) {
        rc = mxct_op_backward(c->op, params, c->is_train, in, c->num_in, aux, heads, grads);
        ck_assert_msg(rc == MXC_OK, "case %d (%s): %s", _i, c->op, mxc_last_error());
        mxct_tensors_free(grads, c->num_in);
    }
    mxct_tensors_free(heads, num_out);
    mxct_tensors_free(in, c->num_in);
    mxct_tensors_free(aux, c->num_aux);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_ops");
    TCase *tc = tcase_create("gpu_ops");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_loop_test(tc, test_gpu_matches_cpu, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* CUDA does not survive fork(): the tests run in one process (as check_gpu's) */
    setenv("CK_FORK", "no", 1);
    if (!mxct_gpu_tests_run())
        printf("check_gpu_ops: GPU tests skipped (no GPU)\n");
    return mxct_run_suite(suite());
}
