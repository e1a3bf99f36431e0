#!/usr/bin/env python3
"""Reference data for tests/check_op_norm.c: LayerNorm, InstanceNorm, GroupNorm, LRN,
L2Normalization, SoftmaxActivation, Pad and UpSampling computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/V/bin/python scripts/gen_op_refs_norm.py

Writes tests/data/ops/norm/<case>.params, one per case, each an mx.nd.save dict of float32
arrays: in0, in1, ... (the operator's inputs), out0, out1, ... (its visible outputs; their
shapes are the shape-inference reference), og0, og1, ... (head gradients, one per visible
output) and grad0, grad1, ... (the input gradients for them). The parameters of each case
are repeated in the C test's case table.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "norm")


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def save(name, op, params, inputs):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(*arrays, **params)
    outs = out if isinstance(out, (list, tuple)) else [out]
    rng = np.random.RandomState(len(name) * 7919 + 13)
    ogs = [mx.nd.array(rand(rng, o.shape)) for o in outs]
    mx.autograd.backward(outs, ogs)
    d = {}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    for k, (o, g) in enumerate(zip(outs, ogs)):
        d["out%d" % k] = o.astype("float32")
        d["og%d" % k] = g
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s -> %s" % (name, op, params, [o.shape for o in outs]))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(19)

    def affine(shape, c):
        return [rand(rng, shape), rand(rng, (c,), 0.5, 1.5), rand(rng, (c,))]

    save("layer_norm_last", "LayerNorm", {}, affine((2, 3, 5), 5))
    save("layer_norm_axis1", "LayerNorm", dict(axis=1, eps=1e-3, output_mean_var=True),
         affine((2, 4, 3), 4))
    save("layer_norm_axis0", "LayerNorm", dict(axis=0), affine((3, 2, 2), 3))
    save("instance_norm", "InstanceNorm", {}, affine((2, 3, 4, 2), 3))
    save("instance_norm_3d", "InstanceNorm", dict(eps=1e-5), affine((2, 3, 5), 3))
    save("group_norm", "GroupNorm", dict(num_groups=2, output_mean_var=True),
         affine((2, 4, 3, 2), 2))
    save("group_norm_one", "GroupNorm", dict(eps=1e-3), affine((2, 3, 4), 1))

    # LRN: the squares over channels c - nsize/2 .. c + nsize/2, scaled by alpha / nsize;
    # MXNet refuses an even nsize
    save("lrn_3", "LRN", dict(nsize=3), [rand(rng, (2, 5, 3, 3))])
    save("lrn_5", "LRN", dict(nsize=5, alpha=0.5, beta=0.5, knorm=1.5), [rand(rng, (1, 7, 2, 3))])

    save("l2_instance", "L2Normalization", {}, [rand(rng, (2, 3, 4))])
    save("l2_channel", "L2Normalization", dict(mode="channel"), [rand(rng, (2, 3, 2, 2))])
    save("l2_spatial", "L2Normalization", dict(mode="spatial", eps=1e-3),
         [rand(rng, (2, 3, 2, 3))])

    # instance mode on 2-D data only: for more axes MXNet's forward takes the softmax over the
    # last axis and its backward sums over axis 1, which is not that forward's gradient
    save("softmax_act_instance", "SoftmaxActivation", {}, [rand(rng, (3, 5))])
    save("softmax_act_channel", "SoftmaxActivation", dict(mode="channel"),
         [rand(rng, (2, 3, 2, 2))])

    x4, x5 = rand(rng, (2, 2, 3, 4)), rand(rng, (1, 2, 2, 3, 3))
    save("pad_constant", "Pad", dict(mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1),
                                     constant_value=0.5), [x4])
    save("pad_edge", "Pad", dict(mode="edge", pad_width=(0, 0, 0, 0, 2, 1, 1, 3)), [x4])
    save("pad_reflect", "Pad", dict(mode="reflect", pad_width=(0, 0, 0, 0, 2, 1, 1, 3)), [x4])
    save("pad_constant_5d", "Pad", dict(mode="constant", pad_width=(0, 0, 0, 0, 1, 0, 0, 1, 2, 1)),
         [x5])
    save("pad_edge_5d", "Pad", dict(mode="edge", pad_width=(0, 0, 0, 0, 1, 2, 2, 0, 1, 1)), [x5])
    save("pad_reflect_5d", "Pad", dict(mode="reflect", pad_width=(0, 0, 0, 0, 1, 1, 2, 0, 1, 2)),
         [x5])

    save("upsampling_2", "UpSampling", dict(scale=2, sample_type="nearest", num_args=1),
         [rand(rng, (2, 3, 2, 3))])
    save("upsampling_concat", "UpSampling", dict(scale=2, sample_type="nearest", num_args=2),
         [rand(rng, (1, 2, 4, 2)), rand(rng, (1, 3, 2, 1))])
    save("upsampling_sum", "UpSampling",
         dict(scale=3, sample_type="nearest", num_args=2, multi_input_mode="sum"),
         [rand(rng, (2, 2, 1, 2)), rand(rng, (2, 2, 3, 6))])
    # bilinear: a Deconvolution of data with the input weight (C, 1, k, k)
    save("upsampling_bilinear_2", "UpSampling",
         dict(scale=2, sample_type="bilinear", num_filter=3, num_args=1),
         [rand(rng, (1, 3, 3, 4)), rand(rng, (3, 1, 4, 4))])
    save("upsampling_bilinear_3", "UpSampling",
         dict(scale=3, sample_type="bilinear", num_filter=2, num_args=1),
         [rand(rng, (2, 2, 2, 3)), rand(rng, (2, 1, 5, 5))])


if __name__ == "__main__":
    main()
