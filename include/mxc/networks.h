/*
 * mxc/networks.h — ready-made network symbols: the MLP, LeNet and ResNet definitions that
 * the examples, the `mxc` tool and the benchmarks train, written with MXNet's operator
 * names and parameters (so their JSON matches what MXNet's own model zoo builds).
 *
 * Every builder ends in SoftmaxOutput named "softmax" (its label argument is
 * "softmax_label") and takes "data" as input. The caller frees the symbol.
 * Thread-safety: any thread; automatic node names use a per-thread counter.
 */
#ifndef MXC_NETWORKS_H
#define MXC_NETWORKS_H

#include "mxc/base.h"
#include "mxc/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A multi-layer perceptron: data -> (FullyConnected hidden[i] -> Activation act_type)
 * for each of the `num_hidden` layers -> FullyConnected num_classes -> SoftmaxOutput.
 * Layers are named fc1, fc2, ... and relu1/tanh1 ... (act_type "relu", "tanh", ...).
 * Returns MXC_OK, MXC_EINVAL (bad sizes or activation), MXC_ENOMEM. */
MXC_API int mxc_net_mlp(int num_hidden, const int *hidden, const char *act_type, int num_classes,
                        mxc_symbol **out);

/** LeNet as in MXNet's examples: conv 5x5x20, tanh, max-pool 2/2, conv 5x5x50, tanh,
 * max-pool 2/2, flatten, fc 500, tanh, fc num_classes, SoftmaxOutput. Input (N, C, H, W).
 * Returns MXC_OK, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_net_lenet(int num_classes, mxc_symbol **out);

/** A ResNet for small images (ResNet-18 layout): conv 3x3 64, BatchNorm, relu, then
 * four stages of `units_per_stage` basic blocks (two 3x3 convolutions with BatchNorm,
 * an identity or 1x1-projection shortcut, relu) of 64, 128, 256 and 512 channels, the
 * last three starting with stride 2; global average pooling, fc num_classes,
 * SoftmaxOutput. units_per_stage 2 is ResNet-18. Returns MXC_OK, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_net_resnet(int units_per_stage, int num_classes, mxc_symbol **out);

#ifdef __cplusplus
}
#endif

#endif /* MXC_NETWORKS_H */
