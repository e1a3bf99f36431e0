/*
 * examples/train_lenet.c — train LeNet on Fashion-MNIST with the C API, building the
 * network layer by layer with mxc_symbol_create (the same net mxc_net_lenet returns), then
 * fitting with SGD and momentum. Reaches about 0.89 test accuracy after 3 epochs; the
 * checkpoint (build/example_lenet-0003.params) is what examples/predict.c reads.
 *
 *   build/bin/example_train_lenet [epochs]
 */
#include "mxc/mxc.h"

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                      \
    do {                                                                 \
        int rc_ = (call);                                                \
        if (rc_ != MXC_OK) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, mxc_last_error()); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

/* net = op(net) with `n` key/value pairs, named `name`; the old handle is released. */
static void layer(mxc_symbol **net, const char *op, const char *name, int n,
                  const char *const *keys, const char *const *vals) {
    mxc_symbol *out = NULL;
    CHECK(mxc_symbol_create(op, n, keys, vals, name, 1, NULL, net, &out));
    mxc_symbol_free(*net);
    *net = out;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 3;
    const char *conv_keys[] = {"kernel", "num_filter"};
    const char *pool_keys[] = {"pool_type", "kernel", "stride"};
    const char *pool_vals[] = {"max", "(2, 2)", "(2, 2)"};
    const char *act_keys[] = {"act_type"}, *tanh_val[] = {"tanh"};
    const char *fc_keys[] = {"num_hidden"};

    mxc_symbol *net = NULL;
    CHECK(mxc_symbol_variable("data", &net)); /* (batch, 1, 28, 28) */
    layer(&net, "Convolution", "conv1", 2, conv_keys, (const char *[]){"(5, 5)", "20"});
    layer(&net, "Activation", "tanh1", 1, act_keys, tanh_val);
    layer(&net, "Pooling", "pool1", 3, pool_keys, pool_vals);
    layer(&net, "Convolution", "conv2", 2, conv_keys, (const char *[]){"(5, 5)", "50"});
    layer(&net, "Activation", "tanh2", 1, act_keys, tanh_val);
    layer(&net, "Pooling", "pool2", 3, pool_keys, pool_vals);
    layer(&net, "Flatten", "flatten", 0, NULL, NULL);
    layer(&net, "FullyConnected", "fc1", 1, fc_keys, (const char *[]){"500"});
    layer(&net, "Activation", "tanh3", 1, act_keys, tanh_val);
    layer(&net, "FullyConnected", "fc2", 1, fc_keys, (const char *[]){"10"});
    layer(&net, "SoftmaxOutput", "softmax", 0, NULL, NULL); /* adds softmax_label */

    mxc_data_iter_params params;
    mxc_data_iter_params_init(&params);
    params.batch_size = 100;
    params.shuffle = 1;
    mxc_data_iter *train = NULL, *test = NULL;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 1, 0, &params, &train));
    params.shuffle = 0;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 0, 0, &params, &test));

    mxc_model *model = NULL;
    CHECK(mxc_model_create(net, &model));
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = epochs;
    cfg.optimizer.lr = 0.05f;
    cfg.optimizer.momentum = 0.9f;
    cfg.checkpoint_prefix = "build/example_lenet";
    mxc_fit_result result;
    CHECK(mxc_model_fit(model, train, test, &cfg, &result));
    printf("test accuracy %.4f after %d epochs; checkpoint build/example_lenet-%04d.params\n",
           result.eval_metric, result.epochs, result.epochs);

    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    mxc_model_free(model);
    mxc_symbol_free(net);
    return 0;
}
