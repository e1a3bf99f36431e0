#!/usr/bin/env python3
"""Reference data for tests/check_op_activations.c: Activation, LeakyReLU and BatchNorm
computed by MXNet 1.9.1 (the oracle). Dropout is random and is tested statistically in C.

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_activations.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/activations/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays: in0, in1, ... (the operator's inputs), out0 (the
forward output), og0 (a head gradient for out0) and grad0, grad1, ... (the input
gradients for og0). BatchNorm cases also hold aux0, aux1 (moving_mean, moving_var
before the step), auxout0, auxout1 (after it), out1, out2 (the hidden outputs: the mean
and the inverse standard deviation used, MXNet's output_mean_var outputs). Training
cases are recorded with train_mode=True and differentiated with train_mode=True;
inference cases with False for both. The parameters of each case are repeated in the C
test's case table.

MXNet's oneDNN path is switched off (MXNET_MKLDNN_ENABLED=0): the native kernels are the
reference semantics. They update BatchNorm's moving statistics in the backward pass
(with the biased batch variance), so every case runs a backward before the moving
statistics are read; mxc updates them in the forward pass, to the same values.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "activations")


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def save(name, op, params, inputs, aux=(), train=False):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    aux_arrays = [mx.nd.array(x, dtype="float32") for x in aux]
    for a in arrays:
        a.attach_grad()
    if op == "BatchNorm":
        params = dict(params, output_mean_var=True)
    with mx.autograd.record(train_mode=train):
        outs = getattr(mx.nd, op)(*(arrays + aux_arrays), **params)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    rng = np.random.RandomState(len(name) * 7919 + 13)
    og = rand(rng, outs[0].shape)
    outs[0].backward(mx.nd.array(og), train_mode=train)
    d = {"og0": mx.nd.array(og)}
    for i, o in enumerate(outs):
        d["out%d" % i] = o.astype("float32")
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    for i, (a0, a) in enumerate(zip(aux, aux_arrays)):
        d["aux%d" % i] = mx.nd.array(a0)
        d["auxout%d" % i] = a
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s train=%s -> %s" % (name, op, params, train, outs[0].shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(7)

    # Activation
    for t in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
        save("act_" + t, "Activation", dict(act_type=t), [rand(rng, (2, 3, 4), -3, 3)])

    # LeakyReLU
    save("leaky", "LeakyReLU", dict(act_type="leaky", slope=0.1),
         [rand(rng, (2, 3, 4), -2, 2)])
    save("leaky_default", "LeakyReLU", dict(), [rand(rng, (3, 5), -2, 2)])
    save("prelu", "LeakyReLU", dict(act_type="prelu"),
         [rand(rng, (2, 3, 2, 2), -2, 2), rand(rng, (3,), 0.1, 0.6)])
    save("elu", "LeakyReLU", dict(act_type="elu", slope=0.5), [rand(rng, (2, 3, 4), -2, 2)])
    save("selu", "LeakyReLU", dict(act_type="selu"), [rand(rng, (2, 3, 4), -2, 2)])
    save("gelu", "LeakyReLU", dict(act_type="gelu"), [rand(rng, (2, 3, 4), -3, 3)])

    # BatchNorm: data, gamma, beta; aux moving_mean, moving_var
    def bn_inputs(shape, c):
        return ([rand(rng, shape, -2, 3), rand(rng, (c,), 0.5, 1.5), rand(rng, (c,))],
                [rand(rng, (c,), -0.5, 0.5), rand(rng, (c,), 0.5, 2.0)])

    ins, aux = bn_inputs((4, 3, 2, 2), 3)
    save("bn_train", "BatchNorm", dict(fix_gamma=False), ins, aux, train=True)
    save("bn_train_fixgamma", "BatchNorm", dict(), ins, aux, train=True)
    save("bn_infer", "BatchNorm", dict(fix_gamma=False), ins, aux, train=False)
    save("bn_global", "BatchNorm", dict(fix_gamma=False, use_global_stats=True), ins, aux,
         train=True)
    ins, aux = bn_inputs((2, 3, 4), 4)
    save("bn_axis_last", "BatchNorm",
         dict(fix_gamma=False, axis=-1, eps=0.01, momentum=0.8), ins, aux, train=True)
    ins, aux = bn_inputs((5, 3), 3)
    save("bn_2d", "BatchNorm", dict(fix_gamma=False), ins, aux, train=True)


if __name__ == "__main__":
    main()
