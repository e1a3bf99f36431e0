#!/usr/bin/env python3
"""Reference data for tests/check_op_layers.c: FullyConnected, Convolution,
Deconvolution and Pooling computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_layers.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/layers/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays: in0, in1, ... (the operator's inputs), out0 (the
forward output), og0 (a head gradient) and grad0, grad1, ... (the input gradients for
og0). The parameters of each case are repeated in the C test's case table.

MXNet's oneDNN (MKLDNN) path is switched off (MXNET_MKLDNN_ENABLED=0, set below): it
cannot build a deconvolution with target_shape (an asymmetric padding), and the native
kernels are the reference semantics anyway. One exception: the native deconvolution
forward mishandles dilation (it disagrees with its own backward and with the adjoint of
Convolution, which the oneDNN path matches), so for dilated deconvolutions out0 is
computed as that adjoint: the data gradient of Convolution (same kernel, stride, dilate,
pad, weight) for a head gradient equal to the deconvolution's input, plus the bias.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "layers")


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def distinct(rng, shape):
    """Values without ties (max pooling picks a unique maximum)."""
    n = int(np.prod(shape))
    v = rng.permutation(n).astype(np.float32) / n * 2 - 1
    return v.reshape(shape)


def deconv_as_conv_adjoint(inputs, params, out_shape):
    """Deconvolution forward as the data gradient of the matching Convolution."""
    x, w = mx.nd.array(inputs[0]), mx.nd.array(inputs[1])
    img = mx.nd.zeros(out_shape)
    img.attach_grad()
    conv = {k: params[k] for k in ("kernel", "stride", "dilate", "pad") if k in params}
    with mx.autograd.record():
        y = mx.nd.Convolution(img, w, num_filter=x.shape[1], no_bias=True, **conv)
    assert y.shape == x.shape, (y.shape, x.shape)
    y.backward(x)
    out = img.grad
    if len(inputs) > 2:
        out = out + mx.nd.array(inputs[2]).reshape((1, -1, 1, 1))
    return out


def save(name, op, params, inputs):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(*arrays, **params)
    rng = np.random.RandomState(len(name) * 7919 + 13)
    og = rand(rng, out.shape)
    out.backward(mx.nd.array(og))
    if op == "Deconvolution" and params.get("dilate", (1, 1)) != (1, 1):
        out = deconv_as_conv_adjoint(inputs, params, out.shape)
    d = {"out0": out.astype("float32"), "og0": mx.nd.array(og)}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s -> %s" % (name, op, params, out.shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(42)

    # FullyConnected
    save("fc_basic", "FullyConnected", dict(num_hidden=5),
         [rand(rng, (4, 6)), rand(rng, (5, 6)), rand(rng, (5,))])
    save("fc_flatten4d", "FullyConnected", dict(num_hidden=4),
         [rand(rng, (2, 3, 2, 2)), rand(rng, (4, 12)), rand(rng, (4,))])
    save("fc_noflatten_nobias", "FullyConnected",
         dict(num_hidden=3, no_bias=True, flatten=False),
         [rand(rng, (2, 3, 4)), rand(rng, (3, 4))])

    # Convolution
    save("conv_basic", "Convolution",
         dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=4),
         [rand(rng, (2, 3, 5, 5)), rand(rng, (4, 3, 3, 3)), rand(rng, (4,))])
    save("conv_group", "Convolution",
         dict(kernel=(3, 3), pad=(1, 1), num_filter=6, num_group=3),
         [rand(rng, (2, 6, 5, 5)), rand(rng, (6, 2, 3, 3)), rand(rng, (6,))])
    save("conv_dilate", "Convolution",
         dict(kernel=(3, 3), dilate=(2, 2), num_filter=3, no_bias=True),
         [rand(rng, (1, 2, 7, 7)), rand(rng, (3, 2, 3, 3))])
    save("conv_rect", "Convolution",
         dict(kernel=(2, 3), stride=(1, 2), pad=(0, 1), num_filter=2),
         [rand(rng, (2, 2, 4, 6)), rand(rng, (2, 2, 2, 3)), rand(rng, (2,))])
    save("conv_1d", "Convolution",
         dict(kernel=(3,), stride=(2,), pad=(1,), num_filter=4),
         [rand(rng, (2, 3, 9)), rand(rng, (4, 3, 3)), rand(rng, (4,))])

    # Deconvolution
    save("deconv_basic", "Deconvolution",
         dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 1), num_filter=4,
              no_bias=False),
         [rand(rng, (2, 3, 3, 3)), rand(rng, (3, 4, 3, 3)), rand(rng, (4,))])
    save("deconv_group", "Deconvolution",
         dict(kernel=(3, 3), num_filter=2, num_group=2),
         [rand(rng, (1, 4, 4, 4)), rand(rng, (4, 1, 3, 3))])
    save("deconv_target", "Deconvolution",
         dict(kernel=(3, 3), stride=(2, 2), target_shape=(8, 8), num_filter=2),
         [rand(rng, (1, 2, 4, 4)), rand(rng, (2, 2, 3, 3))])
    save("deconv_dilate", "Deconvolution",
         dict(kernel=(2, 2), dilate=(2, 2), stride=(2, 1), num_filter=3, no_bias=False),
         [rand(rng, (2, 2, 3, 3)), rand(rng, (2, 3, 2, 2)), rand(rng, (3,))])

    # Pooling
    x = distinct(rng, (2, 3, 5, 5))
    save("pool_max", "Pooling", dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1)), [x])
    save("pool_max_full", "Pooling",
         dict(kernel=(2, 2), stride=(2, 2), pooling_convention="full"), [x])
    save("pool_avg_full", "Pooling",
         dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
              pooling_convention="full"), [x])
    save("pool_avg_nopad", "Pooling",
         dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
              count_include_pad=False), [x])
    save("pool_sum", "Pooling", dict(kernel=(2, 3), stride=(2, 1), pool_type="sum"), [x])
    save("pool_global_avg", "Pooling", dict(kernel=(1, 1), global_pool=True,
                                            pool_type="avg"), [x])
    save("pool_global_max", "Pooling", dict(global_pool=True), [x])
    save("pool_1d", "Pooling", dict(kernel=(3,), stride=(2,), pad=(1,)),
         [distinct(rng, (2, 2, 9))])


if __name__ == "__main__":
    main()
