/*
 * examples/train_mlp.c — train a 784-128-64-10 perceptron on Fashion-MNIST with the C API:
 * build the network, open the data, fit with SGD, report the test accuracy. About ten
 * seconds on two cores; reaches about 0.87 test accuracy after 10 epochs.
 *
 *   build/bin/example_train_mlp [epochs]
 */
#include "mxc/mxc.h"

#include <stdio.h>
#include <stdlib.h>

/* Every mxc call returns a status; on failure mxc_last_error() says what went wrong. */
#define CHECK(call)                                                      \
    do {                                                                 \
        int rc_ = (call);                                                \
        if (rc_ != MXC_OK) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, mxc_last_error()); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 10;

    /* data -> fc1 (128) -> relu -> fc2 (64) -> relu -> fc3 (10) -> SoftmaxOutput */
    int hidden[] = {128, 64};
    mxc_symbol *net = NULL;
    CHECK(mxc_net_mlp(2, hidden, "relu", 10, &net));

    /* Fashion-MNIST as flat (100, 784) batches, pixels scaled to [0, 1] */
    mxc_data_iter_params params;
    mxc_data_iter_params_init(&params);
    params.batch_size = 100;
    params.shuffle = 1;
    mxc_data_iter *train = NULL, *test = NULL;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 1, 1, &params, &train));
    params.shuffle = 0;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 0, 1, &params, &test));

    /* SGD with learning rate 0.1, Xavier initialisation (the defaults' scheme) */
    mxc_model *model = NULL;
    CHECK(mxc_model_create(net, &model));
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = epochs;
    cfg.optimizer.lr = 0.1f;
    cfg.checkpoint_prefix = "build/example_mlp";
    mxc_fit_result result;
    CHECK(mxc_model_fit(model, train, test, &cfg, &result));
    printf("test accuracy %.4f after %d epochs (%.0f samples/s)\n", result.eval_metric,
           result.epochs, result.samples_per_s);

    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    mxc_model_free(model);
    mxc_symbol_free(net);
    return 0;
}
