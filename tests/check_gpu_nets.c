/*
 * tests/check_gpu_nets.c — whole networks on gpu(0) against the CPU: an MLP, LeNet and a
 * ResNet basic block with BatchNorm bound on both devices with the same parameters, one
 * training forward and backward on the same batch, every output, gradient and updated
 * auxiliary state equal within tolerance; the gating network of the executor tests on
 * gpu(0) against the gradients MXNet saved (tests/data/executor/gating.params); and a
 * small MLP trained on the same synthetic data on both devices (executor forward /
 * backward and sgd_update through mxc_imperative_invoke) reaching the same accuracy.
 * Without a GPU every test returns at once and the suite says so in one line.
 * MXC_TEST_COMPARE_ON_CPU=1 runs it with the CPU standing in for gpu(0), to test the tests.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/networks.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The host values of argument or auxiliary state `name` number `i`: the given input if
 * named, else deterministic parameters (BatchNorm's gamma and moving variance near 1). */
static struct mxct_tensor value_of(const char *name, unsigned i, mxc_shape s, int num_in,
                                   const char *const *in_names, const struct mxct_tensor *in) {
    for (int k = 0; k < num_in; k++)
        if (strcmp(name, in_names[k]) == 0)
            return mxct_tensor_from(s, in[k].data);
    if (ends_with(name, "gamma") || ends_with(name, "moving_var"))
        return mxct_tensor_random(s, 0.5f, 1.5f, 100 + i);
    return mxct_tensor_random(s, -0.3f, 0.3f, 100 + i);
}

static void set_array(mxc_ndarray *a, const struct mxct_tensor *t) {
    CK_OK(mxc_nd_sync_copy_from_cpu(a, t->data, (size_t)mxc_shape_size(&t->shape) * sizeof(float)));
}

static struct mxct_tensor get_array(mxc_ndarray *a) {
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(a, &s));
    struct mxct_tensor t = mxct_tensor_from(s, NULL);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, t.data, (size_t)mxc_shape_size(&s) * sizeof(float)));
    return t;
}

/* Binds `sym` on ctx from the shapes of its `num_in` named inputs, sets every argument
 * and auxiliary state (value_of), runs forward (training) and backward with head gradient
 * `head` (NULL for a loss output). */
static mxc_executor *run_net(mxc_symbol *sym, mxc_context ctx, int num_in,
                             const char *const *in_names, const struct mxct_tensor *in,
                             const struct mxct_tensor *head) {
    mxc_shape shapes[8];
    for (int k = 0; k < num_in; k++)
        shapes[k] = in[k].shape;
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_simple_bind(sym, ctx, num_in, in_names, shapes, MXC_GRAD_WRITE, &x));
    int na, naux, nn, nauxn;
    mxc_ndarray *const *args, *const *aux;
    const char *const *names, *const *aux_names;
    CK_OK(mxc_executor_arrays(x, &na, &args, NULL, &naux, &aux));
    CK_OK(mxc_symbol_list_arguments(sym, &nn, &names));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nauxn, &aux_names));
    for (int i = 0; i < na + naux; i++) {
        mxc_ndarray *a = i < na ? args[i] : aux[i - na];
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(a, &s));
        struct mxct_tensor t =
            value_of(i < na ? names[i] : aux_names[i - na], (unsigned)i, s, num_in, in_names, in);
        set_array(a, &t);
        mxct_tensors_free(&t, 1);
    }
    CK_OK(mxc_executor_forward(x, 1));
    mxc_ndarray *h = head ? mxct_array_of(head) : NULL;
    CK_OK(mxc_executor_backward(x, h ? 1 : 0, &h));
    mxc_nd_free(h);
    CK_OK(mxc_nd_wait_all());
    return x;
}

/* gpu ≈ cpu with |d| <= atol * max(1, max |cpu|) + rtol * |cpu|. */
static void expect_near(mxc_ndarray *gpu, mxc_ndarray *cpu, double rtol, double atol,
                        const char *what) {
    struct mxct_tensor g = get_array(gpu), c = get_array(cpu);
    double scale = 1;
    for (int64_t i = 0; i < mxc_shape_size(&c.shape); i++)
        scale = fmax(scale, fabs((double)c.data[i]));
    mxct_expect_close(&g, c.data, rtol, atol * scale, what);
    mxct_tensors_free(&g, 1);
    mxct_tensors_free(&c, 1);
}

/* `sym` bound on the CPU and on gpu(0) with the same values: outputs, every gradient and
 * every auxiliary state after one training step agree. Frees sym. */
static void compare_devices(const char *net, mxc_symbol *sym, int num_in,
                            const char *const *in_names, const struct mxct_tensor *in,
                            const struct mxct_tensor *head, double rtol, double atol) {
    mxc_executor *xc = run_net(sym, mxc_cpu(), num_in, in_names, in, head);
    mxc_executor *xg = run_net(sym, mxct_gpu_device(), num_in, in_names, in, head);
    char what[256];
    int no, no2, na, naux, nn, nauxn;
    mxc_ndarray *const *oc, *const *og, *const *gc, *const *gg, *const *ac, *const *ag;
    const char *const *names, *const *aux_names;
    CK_OK(mxc_executor_outputs(xc, &no, &oc));
    CK_OK(mxc_executor_outputs(xg, &no2, &og));
    ck_assert_int_eq(no, no2);
    for (int k = 0; k < no; k++) {
        snprintf(what, sizeof what, "GPU vs CPU: %s: output %d", net, k);
        expect_near(og[k], oc[k], rtol, atol, what);
    }
    CK_OK(mxc_symbol_list_arguments(sym, &nn, &names));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nauxn, &aux_names));
    CK_OK(mxc_executor_arrays(xc, &na, NULL, &gc, &naux, &ac));
    CK_OK(mxc_executor_arrays(xg, &na, NULL, &gg, &naux, &ag));
    for (int i = 0; i < na; i++) {
        if (gc[i] == NULL)
            continue;
        snprintf(what, sizeof what, "GPU vs CPU: %s: gradient of %s", net, names[i]);
        expect_near(gg[i], gc[i], rtol, atol, what);
    }
    for (int i = 0; i < naux; i++) {
        snprintf(what, sizeof what, "GPU vs CPU: %s: auxiliary state %s after the step", net,
                 aux_names[i]);
        expect_near(ag[i], ac[i], rtol, atol, what);
    }
    mxc_executor_free(xc);
    mxc_executor_free(xg);
    mxc_symbol_free(sym);
}

/* Integer class labels in [0, classes) as floats. */
static struct mxct_tensor labels(int64_t n, int classes, unsigned seed) {
    struct mxct_tensor t = mxct_tensor_random(SHAPE(n), 0, (float)classes, seed);
    for (int64_t i = 0; i < n; i++)
        t.data[i] = floorf(t.data[i]);
    return t;
}

static const char *const data_label[] = {"data", "softmax_label"};

START_TEST(test_mlp_on_both_devices) {
    if (!mxct_gpu_tests_run())
        return;
    mxc_symbol *sym = NULL;
    const int hidden[] = {64, 33};
    CK_OK(mxc_net_mlp(2, hidden, "relu", 10, &sym));
    struct mxct_tensor in[2] = {mxct_tensor_random(SHAPE(17, 50), -1, 1, 1), labels(17, 10, 2)};
    /* FullyConnected through cuBLAS: sums of 50 and 64 products in another order */
    compare_devices("MLP (50-64-33-10, batch 17)", sym, 2, data_label, in, NULL, 1e-3, 1e-4);
    mxct_tensors_free(in, 2);
}
END_TEST

START_TEST(test_lenet_on_both_devices) {
    if (!mxct_gpu_tests_run())
        return;
    mxc_symbol *sym = NULL;
    CK_OK(mxc_net_lenet(10, &sym));
    struct mxct_tensor in[2] = {mxct_tensor_random(SHAPE(8, 1, 28, 28), 0, 1, 3), labels(8, 10, 4)};
    /* cuDNN convolutions (algorithms of their own choice) and cuBLAS: sums of up to
     * 800 products per output, in another order */
    compare_devices("LeNet (batch 8, 1x28x28)", sym, 2, data_label, in, NULL, 2e-3, 2e-4);
    mxct_tensors_free(in, 2);
}
END_TEST

/* conv 3x3 - BatchNorm - relu - conv 3x3 - BatchNorm, + data, relu: a ResNet basic block. */
static mxc_symbol *basic_block(void) {
    static const char *const ck[] = {"kernel", "pad", "num_filter", "no_bias"};
    static const char *const cv[] = {"(3, 3)", "(1, 1)", "16", "True"};
    static const char *const bk[] = {"fix_gamma", "eps"};
    static const char *const bv[] = {"False", "2e-5"};
    mxc_symbol *data = mxct_sym_var("data");
    mxc_symbol *in = mxct_sym_output(data, 0);
    mxc_symbol *s = mxct_sym_apply("Convolution", "conv1", 1, &in, 4, ck, cv);
    s = mxct_sym_apply("BatchNorm", "bn1", 1, &s, 2, bk, bv);
    s = mxct_sym_apply("relu", "relu1", 1, &s, 0, NULL, NULL);
    s = mxct_sym_apply("Convolution", "conv2", 1, &s, 4, ck, cv);
    s = mxct_sym_apply("BatchNorm", "bn2", 1, &s, 2, bk, bv);
    mxc_symbol *sum[2] = {s, data};
    s = mxct_sym_apply("_plus", "add", 2, sum, 0, NULL, NULL);
    return mxct_sym_apply("relu", "relu2", 1, &s, 0, NULL, NULL);
}

START_TEST(test_resnet_block_on_both_devices) {
    if (!mxct_gpu_tests_run())
        return;
    const char *const names[] = {"data"};
    struct mxct_tensor in = mxct_tensor_random(SHAPE(4, 16, 9, 9), -1, 1, 5);
    struct mxct_tensor head = mxct_tensor_random(SHAPE(4, 16, 9, 9), -1, 1, 6);
    /* cuDNN convolutions and batch statistics by block reductions (BatchNorm's gradient
     * sums over N * H * W = 324 per channel, the convolution's over 144 products) */
    compare_devices("ResNet basic block (4x16x9x9)", basic_block(), 1, names, &in, &head, 2e-3,
                    2e-4);
    mxct_tensors_free(&in, 1);
    mxct_tensors_free(&head, 1);
}
END_TEST

/* The executor tests' gating network: FullyConnected(x) * sigmoid(FullyConnected(x)),
 * then FullyConnected 3 (check_executor.c, computed_cases[0]). */
static mxc_symbol *gating_net(void) {
    static const char *const k[] = {"num_hidden"};
    static const char *const five[] = {"5"}, *const three[] = {"3"};
    mxc_symbol *data = mxct_sym_var("data");
    mxc_symbol *in = mxct_sym_output(data, 0);
    mxc_symbol *a = mxct_sym_apply("FullyConnected", "fa", 1, &in, 1, k, five);
    in = mxct_sym_output(data, 0);
    mxc_symbol *b = mxct_sym_apply("FullyConnected", "fb", 1, &in, 1, k, five);
    b = mxct_sym_apply("sigmoid", NULL, 1, &b, 0, NULL, NULL);
    mxc_symbol *ab[2] = {a, b};
    mxc_symbol *y = mxct_sym_apply("_mul", "op", 2, ab, 0, NULL, NULL);
    mxc_symbol_free(data);
    return mxct_sym_apply("FullyConnected", "out", 1, &y, 1, k, three);
}

static mxc_ndarray *named(size_t n, mxc_ndarray **arrays, char **names, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return arrays[i];
    ck_abort_msg("gating.params has no %s", name);
    return NULL;
}

/* The fixture MXNet 1.9.1 saved (scripts/gen_grad_fixtures.py), loaded onto gpu(0): the
 * output and every gradient equal MXNet's (the CPU test's 1e-5, loosened for cuBLAS). */
START_TEST(test_gating_on_gpu_equals_mxnet) {
    if (!mxct_gpu_tests_run())
        return;
    mxc_symbol *sym = gating_net();
    size_t nf = 0;
    mxc_ndarray **ref = NULL;
    char **rnames = NULL;
    CK_OK(mxc_nd_load("tests/data/executor/gating.params", mxct_gpu_device(), &nf, &ref, &rnames));
    int na;
    const char *const *names;
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    ck_assert_int_eq(na, 7);
    mxc_ndarray *args[7], *grads[7];
    char key[128];
    for (int i = 0; i < na; i++) {
        snprintf(key, sizeof key, "arg:%s", names[i]);
        args[i] = named(nf, ref, rnames, key);
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(args[i], &s));
        CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxct_gpu_device(), &grads[i]));
    }
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_bind(sym, mxct_gpu_device(), na, args, grads, NULL, 0, NULL, &x));
    mxc_ndarray *head = named(nf, ref, rnames, "head");
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    int no;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &no, &outs));
    expect_near(outs[0], named(nf, ref, rnames, "output"), 1e-4, 1e-5,
                "gating output on gpu(0) vs MXNet");
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    for (int i = 0; i < na; i++) {
        snprintf(key, sizeof key, "grad:%s", names[i]);
        mxc_ndarray *want = named(nf, ref, rnames, key);
        snprintf(key, sizeof key, "gradient of %s on gpu(0) vs MXNet", names[i]);
        expect_near(grads[i], want, 1e-4, 1e-5, key);
        mxc_nd_free(grads[i]);
    }
    mxc_executor_free(x);
    mxc_nd_list_free(nf, ref, rnames);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Training ------------------------------------------------------------------------ */

enum { TRAIN_N = 512, TRAIN_DIM = 20, TRAIN_CLASSES = 4, TRAIN_BATCH = 64, TRAIN_EPOCHS = 8 };

/* Four Gaussian-like clusters around well separated centres: a separable data set. */
static void synthetic(struct mxct_tensor *x, struct mxct_tensor *y) {
    *x = mxct_tensor_random(SHAPE(TRAIN_N, TRAIN_DIM), -0.5f, 0.5f, 7);
    *y = labels(TRAIN_N, TRAIN_CLASSES, 8);
    for (int i = 0; i < TRAIN_N; i++) {
        int c = (int)y->data[i];
        x->data[i * TRAIN_DIM + c * 5] += 2.0f;
        x->data[i * TRAIN_DIM + c * 5 + 1] -= 1.5f;
    }
}

/* Trains an MLP on ctx with plain SGD (sgd_update on the device's arrays), the same
 * initial weights on both devices; returns the training accuracy after the last epoch. */
static double train_accuracy(mxc_context ctx, const struct mxct_tensor *x,
                             const struct mxct_tensor *y) {
    mxc_symbol *sym = NULL;
    const int hidden[] = {32};
    CK_OK(mxc_net_mlp(1, hidden, "relu", TRAIN_CLASSES, &sym));
    struct mxct_tensor in[2] = {mxct_tensor_from(SHAPE(TRAIN_BATCH, TRAIN_DIM), NULL),
                                mxct_tensor_from(SHAPE(TRAIN_BATCH), NULL)};
    mxc_executor *xe = run_net(sym, ctx, 2, data_label, in, NULL); /* binds and initialises */
    int na, no;
    mxc_ndarray *const *args, *const *grads, *const *outs;
    const char *const *names;
    CK_OK(mxc_executor_arrays(xe, &na, &args, &grads, NULL, NULL));
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    static const char *const keys[] = {"lr", "rescale_grad"};
    static const char *const vals[] = {"0.5", "0.015625"}; /* 1 / TRAIN_BATCH */
    int correct = 0;
    for (int epoch = 0; epoch < TRAIN_EPOCHS; epoch++) {
        correct = 0;
        for (int b = 0; b < TRAIN_N / TRAIN_BATCH; b++) {
            memcpy(in[0].data, x->data + b * TRAIN_BATCH * TRAIN_DIM,
                   sizeof(float) * TRAIN_BATCH * TRAIN_DIM);
            memcpy(in[1].data, y->data + b * TRAIN_BATCH, sizeof(float) * TRAIN_BATCH);
            set_array(args[0], &in[0]);
            set_array(args[na - 1], &in[1]);
            CK_OK(mxc_executor_forward(xe, 1));
            CK_OK(mxc_executor_backward(xe, 0, NULL));
            for (int i = 1; i < na - 1; i++) {
                mxc_ndarray *w_g[2] = {args[i], grads[i]}, *w[1] = {args[i]};
                ck_assert_msg(mxc_imperative_invoke("sgd_update", 2, keys, vals, 2, w_g, 1, w, 1) ==
                                  MXC_OK,
                              "sgd_update of %s: %s", names[i], mxc_last_error());
            }
            CK_OK(mxc_executor_outputs(xe, &no, &outs));
            struct mxct_tensor p = get_array(outs[0]);
            for (int r = 0; r < TRAIN_BATCH; r++) {
                int best = 0;
                for (int c = 1; c < TRAIN_CLASSES; c++)
                    if (p.data[r * TRAIN_CLASSES + c] > p.data[r * TRAIN_CLASSES + best])
                        best = c;
                correct += best == (int)in[1].data[r];
            }
            mxct_tensors_free(&p, 1);
        }
    }
    mxc_executor_free(xe);
    mxc_symbol_free(sym);
    mxct_tensors_free(in, 2);
    return (double)correct / TRAIN_N;
}

START_TEST(test_training_reaches_the_same_accuracy) {
    if (!mxct_gpu_tests_run())
        return;
    struct mxct_tensor x, y;
    synthetic(&x, &y);
    double cpu = train_accuracy(mxc_cpu(), &x, &y);
    double gpu = train_accuracy(mxct_gpu_device(), &x, &y);
    ck_assert_msg(cpu > 0.9, "the CPU run learnt too little: accuracy %.4f", cpu);
    ck_assert_msg(fabs(cpu - gpu) <= 0.01, "training accuracy: cpu %.4f, gpu(0) %.4f", cpu, gpu);
    mxct_tensors_free(&x, 1);
    mxct_tensors_free(&y, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_nets");
    TCase *tc = tcase_create("nets");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_test(tc, test_mlp_on_both_devices);
    tcase_add_test(tc, test_lenet_on_both_devices);
    tcase_add_test(tc, test_resnet_block_on_both_devices);
    tcase_add_test(tc, test_gating_on_gpu_equals_mxnet);
    tcase_add_test(tc, test_training_reaches_the_same_accuracy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* CUDA does not survive fork(): the tests run in one process (as check_gpu's) */
    setenv("CK_FORK", "no", 1);
    if (!mxct_gpu_tests_run())
        printf("check_gpu_nets: GPU tests skipped (no GPU)\n");
    return mxct_run_suite(suite());
}
