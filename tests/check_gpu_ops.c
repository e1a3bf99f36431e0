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
 * The cuDNN section at the end covers each cuDNN path and each fallback to the own kernels,
 * and (in a build with USE_CUDNN, with or without a GPU) the descriptor cache.
 */
#include "mxc/executor.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "operator/cudnn_desc.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a case's inputs are filled. */
enum fill {
    ANY,      /* uniform in [-1, 1) */
    POSITIVE, /* uniform in [0.5, 2): log, sqrt, division, powers */
    CLASSES,  /* integers in [0, classes): labels, Embedding's indices */
    NEAR_ONE, /* uniform in [0.5, 1.5): BatchNorm's gamma and moving variance */
    SMALL,    /* uniform in [0, 0.1): centered RMSProp's mean gradient state */
    LENGTHS,  /* integers in [1, classes]: SequenceLast's lengths */
    TIES,     /* -1, 0 or 1: max pooling windows with ties, relu at 0 */
};

struct gpu_case {
    const char *op;
    const char *kv[13]; /* parameters: key, value, ..., NULL */
    int num_in;
    mxc_shape in[4];
    enum fill fill[4];
    int num_aux;
    mxc_shape aux[3];
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
    /* fills: no inputs (a large one for the grid-stride loop), and the _like pair */
    {"_zeros", {"shape", "(3, 1, 7)", NULL}, 0, {{0}}, {ANY}, 0, {{0}}, 0, true},
    {"_full",
     {"shape", "(2049, 1025)", "value", "-1.25", NULL},
     0,
     {{0}},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"_ones", {"shape", "(1,)", NULL}, 0, {{0}}, {ANY}, 0, {{0}}, 0, true},
    {"zeros_like", {NULL}, 1, {S(5, 1, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"ones_like", {NULL}, 1, {S(33, 5)}, {ANY}, 0, {{0}}, 0, true},
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
    /* tensor manipulation: walks with odd sizes, size-1 axes, negative steps, one large each */
    {"_copy", {NULL}, 1, {S(7, 1, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"squeeze", {NULL}, 1, {S(1, 5, 1, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"SwapAxis", {"dim1", "0", "dim2", "2", NULL}, 1, {S(3, 1, 5, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"flip", {"axis", "(0, 2)", NULL}, 1, {S(3, 5, 7)}, {ANY}, 0, {{0}}, 0, true},
    {"flip", {"axis", "(1,)", NULL}, 1, {S(1025, 2049)}, {ANY}, 0, {{0}}, 0, true},
    {"slice",
     {"begin", "(1, None, -2)", "end", "(None, 1, 0)", "step", "(2, -1, -3)", NULL},
     1,
     {S(5, 4, 9)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"slice",
     {"begin", "(1, 3)", "end", "(2000, -3)", NULL},
     1,
     {S(2049, 1025)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"slice_axis",
     {"axis", "-1", "begin", "2", "end", "None", NULL},
     1,
     {S(3, 11)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"slice_like", {"axes", "(0,)", NULL}, 2, {S(7, 3), S(5, 1)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"stack",
     {"num_args", "3", "axis", "1", NULL},
     3,
     {S(3, 5), S(3, 5), S(3, 5)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"stack",
     {"num_args", "2", NULL},
     2,
     {S(1025, 1023), S(1025, 1023)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"tile", {"reps", "(2, 1, 3)", NULL}, 1, {S(3, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"tile", {"reps", "(1025, 3)", NULL}, 1, {S(2, 341)}, {ANY}, 0, {{0}}, 0, true},
    {"repeat", {"repeats", "3", "axis", "1", NULL}, 1, {S(2, 5, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"repeat", {"repeats", "2", NULL}, 1, {S(1025, 1023)}, {ANY}, 0, {{0}}, 0, true},
    {"broadcast_to", {"shape", "(4, 0, 7)", NULL}, 1, {S(1, 3, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"broadcast_to", {"shape", "(2049, 0)", NULL}, 1, {S(1, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"broadcast_like", {NULL}, 2, {S(5, 1), S(5, 9)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"Embedding",
     {"input_dim", "50000", "output_dim", "64", NULL},
     2,
     {S(4099), S(50000, 64)},
     {CLASSES, ANY},
     0,
     {{0}},
     50000,
     true},
    /* dtypes (float32 here; the other dtypes in test_gpu_dtypes): Cast, mp_sgd_* */
    {"Cast", {"dtype", "float32", NULL}, 1, {S(7, 1, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"mp_sgd_mom_update",
     {"lr", "0.1", "momentum", "0.9", "wd", "0.01", NULL},
     2,
     {S(7, 1, 3), S(7, 1, 3)},
     {ANY, ANY},
     2,
     {S(7, 1, 3), S(7, 1, 3)},
     0,
     true},
    /* optimizer updates: weight, gradient and states of odd and large sizes */
    {"sgd_mom_update",
     {"lr", "0.1", "momentum", "0.9", NULL},
     2,
     {S(7, 1, 3), S(7, 1, 3)},
     {ANY, ANY},
     1,
     {S(7, 1, 3)},
     0,
     true},
    {"nag_mom_update",
     {"lr", "0.1", "momentum", "0.9", "wd", "0.1", "clip_gradient", "0.5", NULL},
     2,
     {S(33, 5), S(33, 5)},
     {ANY, ANY},
     1,
     {S(33, 5)},
     0,
     true},
    {"nag_mom_update",
     {"lr", "0.05", "momentum", "0.8", NULL},
     2,
     {S(LARGE_ROWS, 1025), S(LARGE_ROWS, 1025)},
     {ANY, ANY},
     1,
     {S(LARGE_ROWS, 1025)},
     0,
     true},
    {"rmsprop_update",
     {"lr", "0.01", "wd", "0.1", "clip_weights", "0.9", NULL},
     2,
     {S(17, 3), S(17, 3)},
     {ANY, ANY},
     1,
     {S(17, 3)},
     0,
     true},
    {"rmspropalex_update",
     {"lr", "0.01", "clip_gradient", "0.5", NULL},
     2,
     {S(257), S(257)},
     {ANY, ANY},
     3,
     {S(257), S(257), S(257)},
     0,
     true},
    {"ftrl_update",
     {"lr", "0.1", "lamda1", "0.3", "wd", "0.01", NULL},
     2,
     {S(5, 1, 3), S(5, 1, 3)},
     {ANY, ANY},
     2,
     {S(5, 1, 3), S(5, 1, 3)},
     0,
     true},
    {"signsgd_update",
     {"lr", "0.1", "wd", "0.1", NULL},
     2,
     {S(99), S(99)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"signum_update",
     {"lr", "0.1", "momentum", "0.9", "wd_lh", "0.01", NULL},
     2,
     {S(4097, 3), S(4097, 3)},
     {ANY, ANY},
     1,
     {S(4097, 3)},
     0,
     true},
    {"lamb_update_phase1",
     {"t", "3", "wd", "0.1", "clip_gradient", "0.5", NULL},
     2,
     {S(65), S(65)},
     {ANY, ANY},
     2,
     {S(65), S(65)},
     0,
     true},
    {"_adamw_update",
     {"lr", "0.01", "eta", "0.5", "wd", "0.1", NULL},
     3,
     {S(9, 11), S(9, 11), S(1)},
     {ANY, ANY, POSITIVE},
     2,
     {S(9, 11), S(9, 11)},
     0,
     true},
    {"lamb_update_phase2",
     {"lr", "0.1", "lower_bound", "0.6", NULL},
     4,
     {S(3, 1, 7), S(3, 1, 7), S(1), S(1)},
     {ANY, ANY, POSITIVE, POSITIVE},
     0,
     {{0}},
     0,
     true},
    /* math: element-wise functions, comparisons (tests/check_op_math.c) */
    {"log1p", {NULL}, 1, {S(5, 1, 7)}, {POSITIVE}, 0, {{0}}, 0, true},
    {"rint", {NULL}, 1, {S(33, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"erf", {NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"arctanh", {NULL}, 1, {S(1, 65)}, {ANY}, 0, {{0}}, 0, true},
    {"cbrt", {NULL}, 1, {S(7, 9)}, {POSITIVE}, 0, {{0}}, 0, true},
    {"hard_sigmoid",
     {"alpha", "0.7", "beta", "0.4", NULL},
     1,
     {S(3, 1, 11)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"_greater_equal_scalar", {"scalar", "0.25", NULL}, 1, {S(19)}, {ANY}, 0, {{0}}, 0, true},
    {"_hypot", {NULL}, 2, {S(7, 1, 5), S(7, 1, 5)}, {ANY, POSITIVE}, 0, {{0}}, 0, true},
    {"_logical_xor", {NULL}, 2, {S(2, 9), S(2, 9)}, {CLASSES, CLASSES}, 0, {{0}}, 2, true},
    /* math: broadcasting (tests/check_op_math.c) */
    {"broadcast_maximum",
     {NULL},
     2,
     {S(3, 1, 5), S(1, 4, 5)},
     {CLASSES, CLASSES},
     0,
     {{0}},
     3,
     true},
    {"broadcast_minimum", {NULL}, 2, {S(1001, 4097), S(1, 4097)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"broadcast_power",
     {NULL},
     2,
     {S(2, 3, 4, 5), S(1, 3, 1, 5)},
     {POSITIVE, ANY},
     0,
     {{0}},
     0,
     true},
    {"broadcast_hypot", {NULL}, 2, {S(7, 1), S(1, 9)}, {ANY, ANY}, 0, {{0}}, 0, true},
    {"broadcast_lesser_equal",
     {NULL},
     2,
     {S(5, 2, 1), S(1, 1, 3)},
     {CLASSES, CLASSES},
     0,
     {{0}},
     3,
     true},
    {"broadcast_logical_or", {NULL}, 2, {S(4, 3), S(3)}, {CLASSES, CLASSES}, 0, {{0}}, 2, true},
    /* math: reductions (tests/check_op_math.c) */
    {"min", {"axis", "1", NULL}, 1, {S(9, 31)}, {ANY}, 0, {{0}}, 0, true},
    {"min", {"axis", "0", "keepdims", "True", NULL}, 1, {S(4099, 1001)}, {ANY}, 0, {{0}}, 0, true},
    {"prod", {"axis", "(0, 2)", NULL}, 1, {S(5, 3, 7, 1)}, {NEAR_ONE}, 0, {{0}}, 0, true},
    {"prod", {"axis", "-1", NULL}, 1, {S(3, 101)}, {NEAR_ONE}, 0, {{0}}, 0, true},
    {"nansum", {NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"nanprod",
     {"axis", "1", "exclude", "True", NULL},
     1,
     {S(3, 17, 5)},
     {NEAR_ONE},
     0,
     {{0}},
     0,
     true},
    {"norm", {NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"norm",
     {"ord", "1", "axis", "1", "keepdims", "True", NULL},
     1,
     {S(3, 2001)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    /* normalisation and model-zoo layers (operator/layer_norm.c, ...) */
    {"UpSampling",
     {"scale", "2", "sample_type", "bilinear", "num_filter", "5", "num_args", "1", NULL},
     2,
     {S(2, 5, 7, 9), S(5, 1, 4, 4)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"UpSampling",
     {"scale", "2", "sample_type", "nearest", "num_args", "1", NULL},
     1,
     {S(3, 5, 7, 9)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"UpSampling",
     {"scale", "3", "sample_type", "nearest", "num_args", "2", NULL},
     2,
     {S(2, 3, 4, 6), S(2, 2, 2, 3)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"UpSampling",
     {"scale", "2", "sample_type", "nearest", "num_args", "2", "multi_input_mode", "sum", NULL},
     2,
     {S(16, 32, 64, 64), S(16, 32, 32, 32)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Pad",
     {"mode", "reflect", "pad_width", "(0, 0, 0, 0, 2, 3, 1, 4)", NULL},
     1,
     {S(3, 5, 7, 9)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pad",
     {"mode", "edge", "pad_width", "(0, 0, 0, 0, 1, 2, 3, 0, 2, 2)", NULL},
     1,
     {S(2, 3, 4, 5, 6)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pad",
     {"pad_width", "(0, 0, 0, 0, 1, 1, 1, 1)", "constant_value", "-1", NULL},
     1,
     {S(16, 32, 127, 129)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"L2Normalization", {NULL}, 1, {S(5, 3, 7)}, {ANY}, 0, {{0}}, 0, true},
    {"L2Normalization", {"mode", "channel", NULL}, 1, {S(3, 9, 5, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"L2Normalization", {"mode", "spatial", NULL}, 1, {S(3, 4, 33, 31)}, {ANY}, 0, {{0}}, 0, true},
    {"SoftmaxActivation", {NULL}, 1, {S(5, 3, 7)}, {ANY}, 0, {{0}}, 0, true},
    {"SoftmaxActivation", {"mode", "channel", NULL}, 1, {S(3, 9, 5, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"LRN", {"nsize", "5", NULL}, 1, {S(3, 7, 5, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"LRN", {"nsize", "3", "alpha", "0.1", NULL}, 1, {S(8, 96, 55, 55)}, {ANY}, 0, {{0}}, 0, true},
    {"LayerNorm", {NULL}, 3, {S(33, 17), S(17), S(17)}, {ANY, NEAR_ONE, ANY}, 0, {{0}}, 0, true},
    {"LayerNorm",
     {"axis", "1", "output_mean_var", "True", NULL},
     3,
     {S(3, 7, 5), S(7), S(7)},
     {ANY, NEAR_ONE, ANY},
     0,
     {{0}},
     0,
     true},
    {"LayerNorm",
     {NULL},
     3,
     {S(LARGE_ROWS, 1025), S(1025), S(1025)},
     {ANY, NEAR_ONE, ANY},
     0,
     {{0}},
     0,
     true},
    {"InstanceNorm",
     {NULL},
     3,
     {S(3, 5, 7, 3), S(5), S(5)},
     {ANY, NEAR_ONE, ANY},
     0,
     {{0}},
     0,
     true},
    {"GroupNorm",
     {"num_groups", "3", "output_mean_var", "True", NULL},
     3,
     {S(4, 6, 5, 5), S(3), S(3)},
     {ANY, NEAR_ONE, ANY},
     0,
     {{0}},
     0,
     true},
    /* indexing (operator/indexing_gpu.cu): conditions of 0 and 1, indices partly out of range */
    {"where", {NULL}, 3, {S(37, 5), S(37, 5), S(37, 5)}, {CLASSES, ANY, ANY}, 0, {{0}}, 2, true},
    {"where", {NULL}, 3, {S(37), S(37, 5, 3), S(37, 5, 3)}, {CLASSES, ANY, ANY}, 0, {{0}}, 2, true},
    {"take", {"mode", "wrap", NULL}, 2, {S(50, 7), S(33)}, {ANY, CLASSES}, 0, {{0}}, 60, true},
    {"take", {"axis", "1", NULL}, 2, {S(3, 9, 5), S(4, 2)}, {ANY, CLASSES}, 0, {{0}}, 11, true},
    {"take", {NULL}, 2, {S(2049, 1025), S(3001)}, {ANY, CLASSES}, 0, {{0}}, 2049, true},
    /* mode=raise with every index in range (test_take_raise: out of range) */
    {"take", {"mode", "raise", NULL}, 2, {S(50, 7), S(33)}, {ANY, CLASSES}, 0, {{0}}, 50, true},
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
/* sequences (operator/sequence_gpu.cu): lengths from 0 (1 for SequenceLast) to T */
#define SEQ_LEN "use_sequence_length", "True"
    {"SequenceMask", {SEQ_LEN, NULL}, 2, {S(7, 33, 5), S(33)}, {ANY, CLASSES}, 0, {{0}}, 8, true},
    {"SequenceMask",
     {SEQ_LEN, "axis", "1", "value", "-2", NULL},
     2,
     {S(9, 13, 1, 3), S(9)},
     {ANY, CLASSES},
     0,
     {{0}},
     14,
     true},
    {"SequenceMask",
     {SEQ_LEN, NULL},
     2,
     {S(2049, 1025), S(1025)},
     {ANY, CLASSES},
     0,
     {{0}},
     2050,
     true},
    {"SequenceLast", {SEQ_LEN, NULL}, 2, {S(6, 17, 3), S(17)}, {ANY, LENGTHS}, 0, {{0}}, 6, true},
    {"SequenceLast", {"axis", "1", NULL}, 1, {S(5, 7, 2)}, {ANY}, 0, {{0}}, 0, true},
    {"SequenceLast",
     {SEQ_LEN, "axis", "1", NULL},
     2,
     {S(1025, 2049), S(1025)},
     {ANY, LENGTHS},
     0,
     {{0}},
     2049,
     true},
    {"SequenceReverse",
     {SEQ_LEN, NULL},
     2,
     {S(11, 9, 4), S(9)},
     {ANY, CLASSES},
     0,
     {{0}},
     12,
     true},
    {"SequenceReverse", {NULL}, 1, {S(1025, 2049)}, {ANY}, 0, {{0}}, 0, true},
#undef SEQ_LEN
    /* Crop (operator/crop_gpu.cu) */
    {"Crop",
     {"num_args", "1", "h_w", "(9, 20)", "offset", "(3, 7)", NULL},
     1,
     {S(3, 5, 17, 33)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Crop",
     {"num_args", "2", "center_crop", "True", NULL},
     2,
     {S(2, 3, 31, 31), S(1, 1, 16, 15)},
     {ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"Crop",
     {"num_args", "1", "h_w", "(255, 300)", "center_crop", "True", NULL},
     1,
     {S(4, 8, 512, 513)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    /* the fused RNN (operator/rnn.c): data (T, N, I), parameters, state [, state_cell] */
    {"RNN",
     {"state_size", "7", "num_layers", "2", "mode", "lstm", "bidirectional", "True", NULL},
     4,
     {S(5, 3, 4), S(2016), S(4, 3, 7), S(4, 3, 7)},
     {ANY, ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"RNN",
     {"state_size", "32", "num_layers", "1", "mode", "gru", "state_outputs", "True", NULL},
     3,
     {S(9, 33, 17), S(4896), S(1, 33, 32)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"RNN",
     {"state_size", "5", "num_layers", "3", "mode", "rnn_relu", "state_outputs", "True", NULL},
     3,
     {S(6, 1, 3), S(170), S(3, 1, 5)},
     {ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
    {"RNN",
     {"state_size", "256", "num_layers", "1", "mode", "lstm", "state_outputs", "True", NULL},
     4,
     {S(35, 64, 128), S(395264), S(1, 64, 256), S(1, 64, 256)},
     {ANY, ANY, ANY, ANY},
     0,
     {{0}},
     0,
     true},
};

static struct mxct_tensor filled(mxc_shape s, enum fill f, int classes, unsigned seed) {
    switch (f) {
    case POSITIVE: return mxct_tensor_random(s, 0.5f, 2.0f, seed);
    case NEAR_ONE: return mxct_tensor_random(s, 0.5f, 1.5f, seed);
    case SMALL: return mxct_tensor_random(s, 0.0f, 0.1f, seed);
    case TIES: {
        struct mxct_tensor t = mxct_tensor_random(s, 0, 3, seed);
        for (int64_t i = 0; i < mxc_shape_size(&s); i++)
            t.data[i] = floorf(t.data[i]) - 1.0f;
        return t;
    }
    case CLASSES:
    case LENGTHS: {
        struct mxct_tensor t = mxct_tensor_random(s, 0, (float)classes, seed);
        for (int64_t i = 0; i < mxc_shape_size(&s); i++)
            t.data[i] = floorf(t.data[i]) + (f == LENGTHS);
        return t;
    }
    default: return mxct_tensor_random(s, -1, 1, seed);
    }
}

/* How state i of case c is filled: RMSProp's mean square n positive and, centered, its
 * mean gradient g small (n - g^2 stays positive); otherwise the first ANY, the others
 * NEAR_ONE (BatchNorm's moving mean and variance; Adam's, FTRL's and LAMB's second state
 * is a sum of squares). */
static enum fill aux_fill(const struct gpu_case *c, int i) {
    if (strncmp(c->op, "rmsprop", 7) == 0)
        return i == 0 ? NEAR_ONE : i == 1 ? SMALL : ANY;
    return i ? NEAR_ONE : ANY;
}

/* Outputs of `op` with `params`, hidden ones included: the parameters decide for some (RNN). */
static int num_outputs(const char *op, struct mxct_params params) {
    const struct mxc__op_def *d = mxc__op_find(op);
    _Alignas(16) unsigned char buf[1024];
    CK_OK(mxc__op_parse_params(d, params.num, params.keys, params.vals, buf));
    return mxc__op_num_outputs(d, buf, NULL);
}

/* Case c (numbered idx in its table) on the GPU against the CPU: forward, and backward
 * with write and add-to requests where the operator is differentiable. */
static void check_case(const struct gpu_case *c, int idx) {
    ck_assert_msg(mxc_op_supports(c->op, mxct_gpu_device(), MXC_FLOAT32),
                  "%s has no GPU kernel: case %d compares nothing", c->op, idx);
    const char *kv[14] = {NULL};
    for (int k = 0; k < 13 && c->kv[k]; k++)
        kv[k] = c->kv[k];
    struct mxct_params params = kv[0] ? mxct_params_from_pairs(kv) : MXCT_NO_PARAMS;
    struct mxct_tensor in[4], aux[3], heads[4], grads[4];
    for (int i = 0; i < c->num_in; i++)
        in[i] = filled(c->in[i], c->fill[i], c->classes, 10u * (unsigned)idx + (unsigned)i);
    for (int i = 0; i < c->num_aux; i++)
        aux[i] = filled(c->aux[i], aux_fill(c, i), 0, 500u + (unsigned)i);
    /* the head gradients: run the forward once for the output shapes */
    struct mxct_tensor out[4];
    int rc = mxct_op_forward(c->op, params, c->is_train, in, c->num_in, aux, out);
    ck_assert_msg(rc == MXC_OK, "case %d (%s): %s", idx, c->op, mxc_last_error());
    mxc_op_info info;
    CK_OK(mxc_op_get_info(c->op, &info));
    int num_out = num_outputs(c->op, params);
    for (int k = 0; k < num_out; k++)
        heads[k] = mxct_tensor_random(out[k].shape, -1, 1, 900u + (unsigned)k);
    mxct_tensors_free(out, num_out);
    for (int i = 0; i < c->num_aux; i++) { /* the forward above updated them */
        mxct_tensors_free(&aux[i], 1);
        aux[i] = filled(c->aux[i], aux_fill(c, i), 0, 500u + (unsigned)i);
    }
    if (info.differentiable) {
        rc = mxct_op_backward(c->op, params, c->is_train, in, c->num_in, aux, heads, grads);
        ck_assert_msg(rc == MXC_OK, "case %d (%s): %s", idx, c->op, mxc_last_error());
        mxct_tensors_free(grads, c->num_in);
    }
    mxct_tensors_free(heads, num_out);
    mxct_tensors_free(in, c->num_in);
    mxct_tensors_free(aux, c->num_aux);
}

START_TEST(test_gpu_matches_cpu) {
    if (mxct_gpu_tests_run())
        check_case(&cases[_i], _i);
}
END_TEST

/* A new array on the GPU (or its stand-in) holding `n` values. */
static mxc_ndarray *device_array(mxc_shape s, const float *values) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&s, MXC_FLOAT32, mxct_gpu_device(), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, values, (size_t)mxc_shape_size(&s) * sizeof(float)));
    return a;
}

/* take(a, indices) with mode=raise on the GPU: MXC_EINVAL at the wait when `want_error`
 * (the message holding `needles`), else the rows the indices truncate to. */
static void take_raise(int64_t m, const float *idx, bool want_error, const char *const *needles) {
    const float rows[8] = {0, 1, 10, 11, 20, 21, 30, 31}; /* a (4, 2) */
    mxc_ndarray *in[2] = {device_array(SHAPE(4, 2), rows), device_array(SHAPE(m), idx)};
    mxc_ndarray *out = NULL;
    const char *const k[] = {"mode"}, *const v[] = {"raise"};
    CK_OK(mxc_imperative_invoke("take", 1, k, v, 2, in, 1, &out, 0));
    if (want_error) {
        mxct_expect_error(mxc_nd_wait_to_read(out), MXC_EINVAL, needles);
    } else {
        float got[16];
        CK_OK(mxc_nd_sync_copy_to_cpu(out, got, (size_t)(2 * m) * sizeof(float)));
        for (int64_t i = 0; i < 2 * m; i++)
            ck_assert_float_eq(got[i], rows[2 * (int64_t)idx[i / 2] + i % 2]);
    }
    mxc_nd_free(out);
    mxc_nd_free(in[0]);
    mxc_nd_free(in[1]);
    mxc_nd_wait_all(); /* the failed output's error is reported above */
}

/* take's mode=raise on the GPU refuses an index outside [0, n - 1] as the CPU does, naming
 * the first one (a device-side check read back after the kernel). */
START_TEST(test_take_raise) {
    if (!mxct_gpu_tests_run())
        return;
    take_raise(4, (const float[]){0, 2, 7.5f, -1}, true,
               (const char *const[]){"take", "index 7.5 (at 2)", "[0, 3]", "raise", NULL});
    take_raise(2, (const float[]){1, NAN}, true, (const char *const[]){"take", "(at 1)", NULL});
    take_raise(3, (const float[]){3.5f, 0, 0}, true,
               (const char *const[]){"index 3.5 (at 0)", NULL});
    take_raise(3, (const float[]){2.5f, 0, 3}, false, NULL);
    /* many blocks: the first of two bad indices is named, whichever thread sees it first */
    enum { M = 300007 };
    float *many = calloc(M, sizeof(float));
    many[M - 1] = 4, many[77777] = -2;
    take_raise(M, many, true, (const char *const[]){"index -2 (at 77777)", NULL});
    free(many);
}
END_TEST

/* ---- Other dtypes ---------------------------------------------------------------------- */

static const int dtypes[] = {MXC_FLOAT32, MXC_FLOAT64, MXC_FLOAT16, MXC_UINT8,
                             MXC_INT32,   MXC_INT8,    MXC_INT64};

/* An array of `dtype` on ctx whose elements are `v` cast (on the CPU) to that dtype. */
static mxc_ndarray *typed_on(mxc_context ctx, mxc_shape s, int dtype, const float *v) {
    mxc_ndarray *f = NULL, *t = NULL, *d = NULL;
    CK_OK(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, &f));
    CK_OK(mxc_nd_sync_copy_from_cpu(f, v, (size_t)mxc_shape_size(&s) * sizeof(float)));
    const char *k[] = {"dtype"}, *val[] = {mxc_dtype_name(dtype)};
    CK_OK(mxc_imperative_invoke("Cast", 1, k, val, 1, &f, 1, &t, 0));
    CK_OK(mxc_nd_create(&s, dtype, ctx, 0, &d));
    CK_OK(mxc_nd_copy_to(t, d));
    mxc_nd_free(f);
    mxc_nd_free(t);
    return d;
}

/* a (any device) and b hold the same values: compared as float64 (NaN equals NaN; a
 * device's NaN need not carry the CPU's payload). */
static void expect_same_values(const mxc_ndarray *a, const mxc_ndarray *b, const char *what) {
    ck_assert_int_eq(mxc_nd_dtype(a), mxc_nd_dtype(b));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(b, &s));
    int64_t n = mxc_shape_size(&s);
    const mxc_ndarray *src[2] = {a, b};
    double *x[2];
    for (int k = 0; k < 2; k++) {
        mxc_ndarray *c = NULL, *d = NULL;
        CK_OK(mxc_nd_create(&s, mxc_nd_dtype(b), mxc_cpu(), 0, &c));
        CK_OK(mxc_nd_copy_to(src[k], c));
        const char *key[] = {"dtype"}, *val[] = {"float64"};
        CK_OK(mxc_imperative_invoke("Cast", 1, key, val, 1, &c, 1, &d, 0));
        x[k] = malloc((size_t)n * sizeof(double));
        CK_OK(mxc_nd_sync_copy_to_cpu(d, x[k], (size_t)n * sizeof(double)));
        mxc_nd_free(c);
        mxc_nd_free(d);
    }
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(x[0][i] == x[1][i] || (isnan(x[0][i]) && isnan(x[1][i])),
                      "%s[%lld]: the device gives %.17g, the CPU %.17g", what, (long long)i,
                      x[0][i], x[1][i]);
    free(x[0]);
    free(x[1]);
}

/* Cast between every pair of dtypes on the device against the CPU, forward and (through
 * an executor bound there, add-to: under one dtype the dtype's own addition) backward,
 * with values out of every integer range; transpose; mp_sgd_mom_update with float16
 * weights. */
START_TEST(test_gpu_dtypes) {
    if (!mxct_gpu_tests_run())
        return;
    const mxc_context dev = mxct_gpu_device();
    enum { N = 29 };
    float v[N], h[N];
    for (int i = 0; i < N; i++) {
        v[i] = (float)((i * 7919) % 601 - 300) * 1.37f; /* beyond int8 and uint8 */
        h[i] = (float)(i % 9) - 4.0f;
    }
    v[0] = 1e10f, v[1] = -3e9f, v[2] = NAN, v[3] = INFINITY, v[4] = 65519.0f;
    mxc_shape s = mxc_shape_make(1, (int64_t[]){N});
    for (size_t a = 0; a < sizeof dtypes / sizeof dtypes[0]; a++)
        for (size_t b = 0; b < sizeof dtypes / sizeof dtypes[0]; b++) {
            char what[64];
            snprintf(what, sizeof what, "Cast %s -> %s", mxc_dtype_name(dtypes[a]),
                     mxc_dtype_name(dtypes[b]));
            const char *k[] = {"dtype"}, *val[] = {mxc_dtype_name(dtypes[b])};
            mxc_ndarray *x[2] = {typed_on(mxc_cpu(), s, dtypes[a], v),
                                 typed_on(dev, s, dtypes[a], v)};
            mxc_ndarray *y[2] = {NULL, NULL}, *g[2], *head[2];
            for (int d = 0; d < 2; d++) {
                CK_OK(mxc_imperative_invoke("Cast", 1, k, val, 1, &x[d], 1, &y[d], 0));
                /* backward, add-to onto the data itself */
                mxc_symbol *var = NULL, *sym = NULL;
                CK_OK(mxc_symbol_variable("x", &var)); /* bind takes the declared dtype */
                CK_OK(mxc_symbol_set_attr(var, "__dtype__", mxc_dtype_name(dtypes[a])));
                const char *in_names[] = {"data"};
                CK_OK(mxc_symbol_create("Cast", 1, k, val, "c", 1, in_names, &var, &sym));
                g[d] = typed_on(d ? dev : mxc_cpu(), s, dtypes[a], h);
                head[d] = typed_on(d ? dev : mxc_cpu(), s, dtypes[b], h);
                int req = MXC_GRAD_ADD;
                mxc_executor *ex = NULL;
                CK_OK(mxc_executor_bind(sym, d ? dev : mxc_cpu(), 1, &x[d], &g[d], &req, 0, NULL,
                                        &ex));
                CK_OK(mxc_executor_forward(ex, 1));
                CK_OK(mxc_executor_backward(ex, 1, &head[d]));
                CK_OK(mxc_nd_wait_all());
                mxc_executor_free(ex);
                mxc_symbol_free(sym);
                mxc_symbol_free(var);
            }
            expect_same_values(y[1], y[0], what);
            expect_same_values(g[1], g[0], what);
            for (int d = 0; d < 2; d++) {
                mxc_nd_free(x[d]);
                mxc_nd_free(y[d]);
                mxc_nd_free(g[d]);
                mxc_nd_free(head[d]);
            }
        }
    /* transpose of (4, 7) in other dtypes, add-to onto data's values */
    mxc_shape s2 = mxc_shape_make(2, (int64_t[]){4, 7}), s2t = mxc_shape_make(2, (int64_t[]){7, 4});
    for (size_t a = 1; a < sizeof dtypes / sizeof dtypes[0]; a++) {
        mxc_ndarray *y[2];
        for (int d = 0; d < 2; d++) {
            mxc_ndarray *x = typed_on(d ? dev : mxc_cpu(), s2, dtypes[a], v);
            y[d] = typed_on(d ? dev : mxc_cpu(), s2t, dtypes[a], h);
            CK_OK(mxc_imperative_invoke("transpose", 0, NULL, NULL, 1, &x, 1, &y[d], 0));
            mxc_nd_free(x);
        }
        expect_same_values(y[1], y[0], mxc_dtype_name(dtypes[a]));
        mxc_nd_free(y[0]);
        mxc_nd_free(y[1]);
    }
    /* mp_sgd_mom_update, float16 weight and gradient, three steps in place */
    mxc_ndarray *st[2][4];
    for (int d = 0; d < 2; d++) {
        mxc_context c = d ? dev : mxc_cpu();
        st[d][0] = typed_on(c, s, MXC_FLOAT16, h);
        st[d][1] = typed_on(c, s, MXC_FLOAT16, v);
        st[d][2] = typed_on(c, s, MXC_FLOAT32, h);
        st[d][3] = typed_on(c, s, MXC_FLOAT32, h);
        const char *k[] = {"lr", "momentum", "wd", "clip_gradient"};
        const char *val[] = {"0.01", "0.9", "0.1", "100"};
        for (int step = 0; step < 3; step++)
            CK_OK(mxc_imperative_invoke("mp_sgd_mom_update", 4, k, val, 4, st[d], 1, &st[d][0], 0));
    }
    const char *names[] = {"weight", "grad", "mom", "weight32"};
    for (int i = 0; i < 4; i++) {
        expect_same_values(st[1][i], st[0][i], names[i]);
        mxc_nd_free(st[0][i]);
        mxc_nd_free(st[1][i]);
    }
}
END_TEST

/* ---- cuDNN ---------------------------------------------------------------------------- */

/* Operators with a cuDNN path (a build with USE_CUDNN): each path and each fallback to the
 * own kernel (cudnn_off, parameters or shapes cuDNN does not take), odd shapes, ties. */
static const struct gpu_case dnn_cases[] = {
    /* Activation: cuDNN relu (forward and backward), sigmoid and tanh (forward); the
     * own kernel for their backward and for softsign */
    {"Activation", {"act_type", "relu", NULL}, 1, {S(2, 3, 5, 7)}, {ANY}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "relu", NULL}, 1, {S(3, 1, 7)}, {TIES}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "relu", NULL}, 1, {S(LARGE_ROWS, 1025)}, {ANY}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "sigmoid", NULL}, 1, {S(33, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "tanh", NULL}, 1, {S(1, 1, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"Activation", {"act_type", "softsign", NULL}, 1, {S(5, 9)}, {ANY}, 0, {{0}}, 0, true},
    /* softmax family: cuDNN along any axis; temperature 2 takes the own kernel */
    {"softmax", {NULL}, 1, {S(7, 13)}, {ANY}, 0, {{0}}, 0, true},
    {"softmax", {"axis", "1", NULL}, 1, {S(3, 5, 2, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"log_softmax", {"axis", "0", NULL}, 1, {S(4, 3, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"log_softmax", {NULL}, 1, {S(1, 1)}, {ANY}, 0, {{0}}, 0, true},
    {"softmax", {"temperature", "2", NULL}, 1, {S(5, 6)}, {ANY}, 0, {{0}}, 0, true},
    {"log_softmax",
     {"temperature", "0.5", "axis", "1", NULL},
     1,
     {S(2, 6, 3)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"SoftmaxActivation", {"mode", "channel", NULL}, 1, {S(2, 4, 3, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"SoftmaxActivation", {NULL}, 1, {S(3, 7)}, {ANY}, 0, {{0}}, 0, true},
    /* Pooling: cuDNN max and avg (valid, global, 1-D); cudnn_off, the full convention
     * with a ceiling, and sum take the own kernel; ties in max windows */
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
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pool_type", "max", "cudnn_off", "True", NULL},
     1,
     {S(2, 3, 13, 11)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3, 3)", "pad", "(1, 1)", "pool_type", "max", NULL},
     1,
     {S(2, 3, 7, 9)},
     {TIES},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(2, 2)", "stride", "(2, 2)", "pool_type", "max", NULL},
     1,
     {S(3, 2, 8, 6)},
     {TIES},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(2, 3)", "pad", "(1, 1)", "pool_type", "avg", "count_include_pad", "True", NULL},
     1,
     {S(1, 2, 5, 7)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pad", "(1, 1)", "pool_type", "avg",
      "count_include_pad", "False", NULL},
     1,
     {S(2, 3, 9, 8)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pool_type", "max", "pooling_convention", "full",
      NULL},
     1,
     {S(2, 3, 10, 10)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3, 3)", "stride", "(2, 2)", "pool_type", "avg", "pooling_convention", "full",
      NULL},
     1,
     {S(1, 2, 9, 9)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(1, 1)", "global_pool", "True", "pool_type", "max", NULL},
     1,
     {S(2, 5, 6, 7)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(3,)", "stride", "(2,)", "pool_type", "max", NULL},
     1,
     {S(2, 3, 17)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"Pooling",
     {"kernel", "(2, 2)", "pool_type", "sum", NULL},
     1,
     {S(1, 2, 6, 6)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    /* BatchNorm: cuDNN in training (fix_gamma either way, momentum) and in inference
     * (use_global_stats; is_train false); cudnn_off, a channel axis other than 1 and
     * channels of one element take the own kernels */
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
     {"fix_gamma", "True", "momentum", "0.5", NULL},
     3,
     {S(4, 3, 5, 5), S(3), S(3)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(3), S(3)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", "eps", "1e-6", NULL},
     3,
     {S(6, 2, 3, 1), S(2), S(2)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(2), S(2)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", "cudnn_off", "True", NULL},
     3,
     {S(5, 7, 3, 3), S(7), S(7)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(7), S(7)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", "use_global_stats", "True", NULL},
     3,
     {S(3, 6, 4, 4), S(6), S(6)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(6), S(6)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(2, 5, 3, 3), S(5), S(5)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(5), S(5)},
     0,
     false},
    {"BatchNorm",
     {"fix_gamma", "False", "axis", "-1", NULL},
     3,
     {S(4, 3, 6), S(6), S(6)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(6), S(6)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(1, 4), S(4), S(4)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(4), S(4)},
     0,
     true},
    {"BatchNorm",
     {"fix_gamma", "False", NULL},
     3,
     {S(64, 16, 17, 17), S(16), S(16)},
     {ANY, NEAR_ONE, ANY},
     2,
     {S(16), S(16)},
     0,
     true},
    /* LRN: cuDNN within its limits; nsize above 16 and knorm below 1e-5 take the own
     * kernels */
    {"LRN", {"nsize", "5", NULL}, 1, {S(2, 7, 4, 5)}, {ANY}, 0, {{0}}, 0, true},
    {"LRN",
     {"nsize", "3", "alpha", "0.001", "beta", "0.5", "knorm", "1", NULL},
     1,
     {S(1, 3, 3, 3)},
     {ANY},
     0,
     {{0}},
     0,
     true},
    {"LRN", {"nsize", "17", NULL}, 1, {S(1, 20, 2, 3)}, {ANY}, 0, {{0}}, 0, true},
    {"LRN",
     {"nsize", "3", "alpha", "1", "knorm", "1e-6", NULL},
     1,
     {S(1, 5, 2, 2)},
     {ANY},
     0,
     {{0}},
     0,
     true},
};

START_TEST(test_gpu_dnn_matches_cpu) {
    if (mxct_gpu_tests_run())
        check_case(&dnn_cases[_i], 1000 + _i);
}
END_TEST

#ifdef MXC_USE_CUDNN
/* The dims of a cached tensor descriptor are (n, c, h, w). */
static void expect_dims(cudnnTensorDescriptor_t t, int n, int c, int h, int w) {
    cudnnDataType_t type;
    int v[4], strides[4];
    ck_assert_int_eq(cudnnGetTensor4dDescriptor(t, &type, &v[0], &v[1], &v[2], &v[3], &strides[0],
                                                &strides[1], &strides[2], &strides[3]),
                     CUDNN_STATUS_SUCCESS);
    ck_assert_int_eq(type, CUDNN_DATA_FLOAT);
    ck_assert(v[0] == n && v[1] == c && v[2] == h && v[3] == w);
}

static struct mxc__dnn_key tensor_key(int n, int c, int h, int w) {
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_TENSOR;
    ck_assert(mxc__dnn_dims(k.x, (const int64_t[]){n, c, h, w}, 4));
    return k;
}

/* The per-thread descriptor cache (operator/cudnn_desc.c; descriptors are host objects, so
 * this runs without a GPU): an entry is made once and found again, a problem cuDNN does not
 * describe is answered MXC__DNN_OWN (every time), a full table replaces its least recently
 * used entry and a replaced problem is described anew. */
START_TEST(test_dnn_cache) {
    const struct mxc__dnn *a, *d;
    const struct mxc__dnn_key ka = tensor_key(2, 3, 4, 5);
    CK_OK(mxc__dnn_get(NULL, &ka, &a, NULL));
    expect_dims(a->x, 2, 3, 4, 5);
    for (int i = 0; i < 200; i++) { /* more problems than entries; a stays the most recent */
        const struct mxc__dnn_key k = tensor_key(1, 1, 1, i + 1);
        CK_OK(mxc__dnn_get(NULL, &k, &d, NULL));
        expect_dims(d->x, 1, 1, 1, i + 1);
        CK_OK(mxc__dnn_get(NULL, &ka, &d, NULL));
        ck_assert_ptr_eq(d, a);
    }
    const struct mxc__dnn_key k0 = tensor_key(1, 1, 1, 1); /* long replaced */
    CK_OK(mxc__dnn_get(NULL, &k0, &d, NULL));
    expect_dims(d->x, 1, 1, 1, 1);
    ck_assert_ptr_eq(d->act, NULL);
    /* pooling: 3x3 windows, pad 1, stride 2 over (2, 3, 4, 5) give (2, 3, 2, 3) */
    struct mxc__dnn_key kp;
    memset(&kp, 0, sizeof kp);
    kp.kind = MXC__DNN_POOL;
    memcpy(kp.x, (const int[]){2, 3, 4, 5}, sizeof kp.x);
    memcpy(kp.p, (const int[]){CUDNN_POOLING_MAX_DETERMINISTIC, 3, 3, 1, 1, 2, 2}, 7 * sizeof(int));
    memcpy(kp.y, (const int[]){2, 3, 2, 3}, sizeof kp.y);
    CK_OK(mxc__dnn_get(NULL, &kp, &d, NULL));
    expect_dims(d->y, 2, 3, 2, 3);
    ck_assert_ptr_ne(d->pool, NULL);
    kp.y[3] = 4; /* not the output cuDNN computes (a full convention's ceiling) */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(mxc__dnn_get(NULL, &kp, &d, NULL), MXC__DNN_OWN);
    /* BatchNorm's per-channel tensor; LRN beyond cuDNN's window */
    struct mxc__dnn_key kb = tensor_key(8, 5, 3, 1);
    kb.kind = MXC__DNN_BN;
    CK_OK(mxc__dnn_get(NULL, &kb, &d, NULL));
    expect_dims(d->y, 1, 5, 1, 1);
    struct mxc__dnn_key kl = tensor_key(1, 20, 2, 2);
    kl.kind = MXC__DNN_LRN;
    kl.p[0] = 17;
    kl.f[0] = 1e-4, kl.f[1] = 0.75, kl.f[2] = 2;
    ck_assert_int_eq(mxc__dnn_get(NULL, &kl, &d, NULL), MXC__DNN_OWN);
    kl.p[0] = 5;
    CK_OK(mxc__dnn_get(NULL, &kl, &d, NULL));
    ck_assert_ptr_ne(d->lrn, NULL);
    /* sizes no descriptor takes */
    int dims[4];
    ck_assert(!mxc__dnn_dims(dims, (const int64_t[]){1, 0, 1, 1}, 4));
    ck_assert(!mxc__dnn_dims(dims, (const int64_t[]){1, 1, (int64_t)1 << 31, 1}, 4));
}
END_TEST
#endif

static Suite *suite(void) {
    Suite *s = suite_create("gpu_ops");
    TCase *tc = tcase_create("gpu_ops");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_loop_test(tc, test_gpu_matches_cpu, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_take_raise);
    tcase_add_test(tc, test_gpu_dtypes);
    tcase_add_loop_test(tc, test_gpu_dnn_matches_cpu, 0,
                        (int)(sizeof dnn_cases / sizeof dnn_cases[0]));
#ifdef MXC_USE_CUDNN
    tcase_add_test(tc, test_dnn_cache);
#endif
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
