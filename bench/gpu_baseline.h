/*
 * bench/gpu_baseline.h — bench_train --ctx gpu's baseline: a training step of the MLP,
 * LeNet and ResNet-18 written by hand as direct cuBLAS and cuDNN calls on one stream (no
 * mxc kernel, no engine), the speed the library's own GPU training is measured against.
 *
 * Same layers, shapes and parameter values as mxc's networks (mxc/networks.h), loss
 * softmax cross-entropy averaged over the batch, plain SGD with momentum. Implemented in
 * a build with MXC_USE_CUDA and MXC_USE_CUDNN (bench/gpu_baseline.c); elsewhere
 * gpu_baseline_create says why there is none. Bench code: a failing CUDA, cuBLAS or cuDNN
 * call prints what failed and exits the process with status 1.
 */
#ifndef MXC_BENCH_GPU_BASELINE_H
#define MXC_BENCH_GPU_BASELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The networks, as mxc/networks.h builds them for bench_train. */
enum gpu_baseline_net {
    GPU_BASELINE_MLP,     /**< mxc_net_mlp(2, {128, 64}, "relu", 10) */
    GPU_BASELINE_LENET,   /**< mxc_net_lenet(10) */
    GPU_BASELINE_RESNET18 /**< mxc_net_resnet(2, 10) */
};

typedef struct gpu_baseline_config {
    enum gpu_baseline_net net;
    int batch;
    int channels, height, width; /**< one sample: (784, 1, 1) for the MLP's flat input */
    float lr, momentum, wd;      /**< SGD as mxc's sgd(_mom)_update, the batch mean gradient */
    /** Fills parameter `name` (mxc's argument name: "fc1_weight", "stem_bn_gamma", ...)
     * with its `count` initial values; false when there is no such parameter of that
     * size (gpu_baseline_create then fails). */
    bool (*init)(void *user, const char *name, int64_t count, float *values);
    void *user;
} gpu_baseline_config;

typedef struct gpu_baseline gpu_baseline;

/** Builds the network on the current CUDA device (descriptors, the algorithms cuDNN's
 * heuristic ranks first, all buffers) and sets its parameters through cfg->init; the
 * BatchNorm moving statistics start at 0 (mean) and 1 (variance), the momenta at 0.
 * Returns NULL with the reason in `why` when this build has no baseline (no cuDNN) or a
 * parameter is refused by cfg->init; `*num_params` (if not NULL) receives how many
 * parameter arrays it asked cfg->init for. */
gpu_baseline *gpu_baseline_create(const gpu_baseline_config *cfg, int *num_params, char *why,
                                  size_t why_size);

/** One training-mode forward pass (BatchNorm on the batch's statistics) of the batch
 * `data` (batch samples, host memory), then waits and copies the softmax output
 * (batch x classes) into `probs` (host memory). */
void gpu_baseline_forward(gpu_baseline *b, const float *data, float *probs);

/** Enqueues `batches` training steps, step i on the batch at data + i * batch * sample
 * size with the one-hot labels at onehot + i * batch * classes (host memory): copies of
 * both, forward, backward, SGD update; then waits for the stream. */
void gpu_baseline_train(gpu_baseline *b, const float *data, const float *onehot, long batches);

/** Frees everything; NULL is a no-op. */
void gpu_baseline_free(gpu_baseline *b);

#endif /* MXC_BENCH_GPU_BASELINE_H */
