/*
 * examples/predict.c — load a checkpoint (mxc's or MXNet's: prefix-symbol.json and
 * prefix-EEEE.params) and classify the first ten Fashion-MNIST test images.
 *
 *   build/bin/example_predict [prefix] [epoch]     (default: build/example_lenet 3)
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

static const char *const classes[10] = {"T-shirt", "trouser", "pullover", "dress", "coat",
                                        "sandal",  "shirt",   "sneaker",  "bag",   "boot"};

int main(int argc, char **argv) {
    const char *prefix = argc > 1 ? argv[1] : "build/example_lenet";
    int epoch = argc > 2 ? atoi(argv[2]) : 3;
    mxc_model *model = NULL;
    CHECK(mxc_model_load(prefix, epoch, &model));

    /* the network's input layout: flat for an MLP, images for a convolutional net */
    const char *json;
    CHECK(mxc_symbol_save_json(mxc_model_symbol(model), &json));
    int flat = strstr(json, "Convolution") == NULL;

    mxc_data_iter_params params;
    mxc_data_iter_params_init(&params);
    params.batch_size = 10;
    mxc_data_iter *test = NULL;
    CHECK(mxc_data_iter_create_fashion_mnist(NULL, 0, flat, &params, &test));

    mxc_ndarray *probs = NULL; /* (10000, 10) class probabilities */
    CHECK(mxc_model_predict(model, test, &probs));
    mxc_ndarray *first = NULL; /* a view of the first ten rows */
    CHECK(mxc_nd_slice(probs, 0, 10, &first));
    float p[100], labels[10];
    CHECK(mxc_nd_sync_copy_to_cpu(first, p, sizeof p));
    CHECK(mxc_data_iter_reset(test));
    if (mxc_data_iter_next(test) != 1) {
        fprintf(stderr, "no test batch: %s\n", mxc_last_error());
        return 1;
    }
    CHECK(mxc_nd_sync_copy_to_cpu(mxc_data_iter_label(test), labels, sizeof labels));
    for (int i = 0; i < 10; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (p[10 * i + k] > p[10 * i + best])
                best = k;
        printf("image %d: predicted %-8s (p = %.2f), true %s\n", i, classes[best],
               (double)p[10 * i + best], classes[(int)labels[i]]);
    }
    mxc_nd_free(first);
    mxc_nd_free(probs);
    mxc_data_iter_free(test);
    mxc_model_free(model);
    return 0;
}
