/*
 * examples/train_autograd.c — train LeNet on Fashion-MNIST imperatively, MXNet-autograd
 * style: each batch's forward is a sequence of mxc_imperative_invoke calls made while
 * recording, mxc_autograd_backward fills the weights' gradients, and the sgd_mom_update
 * operator updates each weight in place. Then, for comparison, the same network (the
 * symbol mxc_net_lenet builds) is trained by the symbolic fit (mxc_model_fit) with the
 * same initialisation, optimizer and epochs, and both test accuracies are printed.
 *
 *   build/bin/example_train_autograd [epochs]      (default 1)
 *
 * Measured on a 2-core machine, one epoch (batch 100, lr 0.05, momentum 0.9, Xavier
 * initialisation from seed 0): autograd 0.8645, symbolic fit 0.8645 test accuracy — the
 * same, as both run the same kernels and gradient rules on the same batches.
 */
#include "mxc/mxc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                      \
    do {                                                                 \
        int rc_ = (call);                                                \
        if (rc_ != MXC_OK) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, mxc_last_error()); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

#define BATCH    100
#define LR       0.05f
#define MOMENTUM 0.9f

/* LeNet's parameters, named as mxc_net_lenet names them (so the initializer treats each
 * the same way in both runs), with their shapes. */
enum { CONV1_W, CONV1_B, CONV2_W, CONV2_B, FC1_W, FC1_B, FC2_W, FC2_B, NUM_PARAMS };
static const char *const param_names[NUM_PARAMS] = {"conv1_weight", "conv1_bias", "conv2_weight",
                                                    "conv2_bias",   "fc1_weight", "fc1_bias",
                                                    "fc2_weight",   "fc2_bias"};
static const int param_ndim[NUM_PARAMS] = {4, 1, 4, 1, 2, 1, 2, 1};
static const int64_t param_dims[NUM_PARAMS][4] = {{20, 1, 5, 5}, {20},  {50, 20, 5, 5}, {50},
                                                  {500, 800},    {500}, {10, 500},      {10}};

/* out = op(inputs) with key/value parameters; returns the new output array. Training
 * behaviour comes from the thread's training mode (mxc_autograd_set_training). */
static mxc_ndarray *run(const char *op, int n, mxc_ndarray *const *in, int np,
                        const char *const *keys, const char *const *vals) {
    mxc_ndarray *out = NULL;
    CHECK(mxc_imperative_invoke(op, np, keys, vals, n, in, 1, &out, 0));
    return out;
}

/* run() on one input, freeing it: the layer's result replaces it. */
static mxc_ndarray *then(mxc_ndarray *x, const char *op, int np, const char *const *keys,
                         const char *const *vals) {
    mxc_ndarray *y = run(op, 1, &x, np, keys, vals);
    mxc_nd_free(x);
    return y;
}

/* A Convolution or FullyConnected layer with weight w and bias b; frees x unless keep. */
static mxc_ndarray *affine(const char *op, mxc_ndarray *x, mxc_ndarray *w, mxc_ndarray *b,
                           const char *key, const char *val, int keep) {
    const char *keys[] = {"kernel", key}, *vals[] = {"(5, 5)", val};
    int conv = strcmp(op, "Convolution") == 0;
    mxc_ndarray *in[3] = {x, w, b};
    mxc_ndarray *y = run(op, 3, in, conv ? 2 : 1, conv ? keys : keys + 1, conv ? vals : vals + 1);
    if (!keep)
        mxc_nd_free(x);
    return y;
}

/* LeNet's forward (data (B, 1, 28, 28) -> class probabilities (B, 10)), layer by layer. */
static mxc_ndarray *lenet(mxc_ndarray *data, mxc_ndarray *label, mxc_ndarray *const *p) {
    const char *act_k[] = {"act_type"}, *tanh_v[] = {"tanh"};
    const char *pool_k[] = {"pool_type", "kernel", "stride"};
    const char *pool_v[] = {"max", "(2, 2)", "(2, 2)"};
    mxc_ndarray *h = affine("Convolution", data, p[CONV1_W], p[CONV1_B], "num_filter", "20", 1);
    h = then(h, "Activation", 1, act_k, tanh_v); /* (B, 20, 24, 24) */
    h = then(h, "Pooling", 3, pool_k, pool_v);   /* (B, 20, 12, 12) */
    h = affine("Convolution", h, p[CONV2_W], p[CONV2_B], "num_filter", "50", 0);
    h = then(h, "Activation", 1, act_k, tanh_v); /* (B, 50, 8, 8) */
    h = then(h, "Pooling", 3, pool_k, pool_v);   /* (B, 50, 4, 4) */
    h = then(h, "Flatten", 0, NULL, NULL);       /* (B, 800) */
    h = affine("FullyConnected", h, p[FC1_W], p[FC1_B], "num_hidden", "500", 0);
    h = then(h, "Activation", 1, act_k, tanh_v);                                /* (B, 500) */
    h = affine("FullyConnected", h, p[FC2_W], p[FC2_B], "num_hidden", "10", 0); /* (B, 10) */
    mxc_ndarray *in[2] = {h, label};
    mxc_ndarray *y = run("SoftmaxOutput", 2, in, 0, NULL, NULL);
    mxc_nd_free(h);
    return y;
}

/* Share of the test set whose most probable class is the label. */
static double accuracy(mxc_data_iter *test, mxc_ndarray *const *p) {
    int64_t right = 0, seen = 0;
    float prob[BATCH * 10], label[BATCH];
    CHECK(mxc_data_iter_reset(test));
    while (mxc_data_iter_next(test) == 1) {
        mxc_ndarray *data = mxc_data_iter_data(test), *lab = mxc_data_iter_label(test);
        mxc_ndarray *y = lenet(data, lab, p); /* not recording: nothing is taped */
        CHECK(mxc_nd_sync_copy_to_cpu(y, prob, sizeof prob));
        CHECK(mxc_nd_sync_copy_to_cpu(lab, label, sizeof label));
        mxc_nd_free(y);
        int64_t n = BATCH - mxc_data_iter_pad(test);
        for (int64_t i = 0; i < n; i++) {
            int best = 0;
            for (int c = 1; c < 10; c++)
                if (prob[i * 10 + c] > prob[i * 10 + best])
                    best = c;
            right += best == (int)label[i];
        }
        seen += n;
    }
    return (double)right / (double)seen;
}

static double train_autograd(mxc_data_iter *train, mxc_data_iter *test, int epochs) {
    mxc_ndarray *p[NUM_PARAMS], *grad[NUM_PARAMS], *mom[NUM_PARAMS];
    mxc_init_config init = {.kind = MXC_INIT_XAVIER, .xavier_magnitude = 3}; /* as fit's */
    CHECK(mxc_random_seed(0));
    for (int i = 0; i < NUM_PARAMS; i++) {
        mxc_shape s = mxc_shape_make(param_ndim[i], param_dims[i]);
        CHECK(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, &p[i]));
        CHECK(mxc_init_array(&init, param_names[i], p[i]));
        CHECK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &grad[i]));
        CHECK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &mom[i]));
    }
    CHECK(mxc_autograd_mark_variables(NUM_PARAMS, p, grad, NULL));

    char lr[32], mo[32], rescale[32];
    snprintf(lr, sizeof lr, "%g", (double)LR);
    snprintf(mo, sizeof mo, "%g", (double)MOMENTUM);
    snprintf(rescale, sizeof rescale, "%g", 1.0 / BATCH); /* the loss gradient is a sum */
    const char *keys[] = {"lr", "momentum", "rescale_grad"}, *vals[] = {lr, mo, rescale};
    for (int e = 0; e < epochs; e++) {
        CHECK(mxc_data_iter_reset(train));
        int64_t batches = 0;
        CHECK(mxc_autograd_set_training(1, NULL));
        while (mxc_data_iter_next(train) == 1) {
            CHECK(mxc_autograd_set_recording(1, NULL));
            mxc_ndarray *y = lenet(mxc_data_iter_data(train), mxc_data_iter_label(train), p);
            CHECK(mxc_autograd_set_recording(0, NULL));
            CHECK(mxc_autograd_backward(1, &y, NULL, 0));
            mxc_nd_free(y);
            for (int i = 0; i < NUM_PARAMS; i++) { /* weight updated in place, mom too */
                mxc_ndarray *in[3] = {p[i], grad[i], mom[i]}, *out[1] = {p[i]};
                CHECK(mxc_imperative_invoke("sgd_mom_update", 3, keys, vals, 3, in, 1, out, 0));
            }
            if (++batches % 100 == 0)
                printf("autograd: epoch %d, batch %lld\n", e, (long long)batches);
        }
        CHECK(mxc_autograd_set_training(0, NULL));
        printf("autograd: epoch %d test accuracy %.4f\n", e, accuracy(test, p));
    }
    double acc = accuracy(test, p);
    for (int i = 0; i < NUM_PARAMS; i++) {
        mxc_nd_free(p[i]);
        mxc_nd_free(grad[i]);
        mxc_nd_free(mom[i]);
    }
    return acc;
}

static double train_symbolic(mxc_data_iter *train, mxc_data_iter *test, int epochs) {
    mxc_symbol *net = NULL;
    mxc_model *model = NULL;
    CHECK(mxc_net_lenet(10, &net));
    CHECK(mxc_model_create(net, &model));
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg); /* Xavier (magnitude 3), seed 0 */
    cfg.num_epochs = epochs;
    cfg.optimizer.lr = LR;
    cfg.optimizer.momentum = MOMENTUM;
    cfg.frequent = 100;
    mxc_fit_result result;
    CHECK(mxc_model_fit(model, train, test, &cfg, &result));
    mxc_model_free(model);
    mxc_symbol_free(net);
    return result.eval_metric;
}

/* Trains with `train_fn` on fresh iterators (so both runs see batches in the same order). */
static double with_data(double (*train_fn)(mxc_data_iter *, mxc_data_iter *, int), int epochs) {
    mxc_data_iter_params params;
    mxc_data_iter_params_init(&params);
    params.batch_size = BATCH;
    params.shuffle = 1;
    mxc_data_iter *train = NULL, *test = NULL;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 1, 0, &params, &train));
    params.shuffle = 0;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 0, 0, &params, &test));
    double acc = train_fn(train, test, epochs);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    return acc;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines in order with the fit's */
    double imperative = with_data(train_autograd, epochs);
    double symbolic = with_data(train_symbolic, epochs);
    printf("test accuracy after %d epoch(s): autograd %.4f, symbolic fit %.4f\n", epochs,
           imperative, symbolic);
    return 0;
}
