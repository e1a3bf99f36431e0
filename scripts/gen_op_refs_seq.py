#!/usr/bin/env python3
"""Reference data for tests/check_op_seq.c: SequenceMask, SequenceLast, SequenceReverse and
the legacy Crop computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/V/bin/python scripts/gen_op_refs_seq.py

Writes tests/data/ops/seq/<case>.params, one per case, each an mx.nd.save dict of float32
arrays: in0, in1 (the operator's inputs: data, then sequence_length or crop_like), out0 (its
output; its shape is the shape-inference reference), og0 (a head gradient) and grad0,
grad1 ... (the gradients MXNet gives the differentiable inputs: data, and Crop's crop_like,
which gets zeros; sequence_length has none; og0 and grad* are left out where MXNet's backward
is broken). The parameters of each case are repeated in
the C test's case table. The lengths include what MXNet defines at the edges: fractions
(truncated), lengths past the steps for SequenceMask, 0 for SequenceMask and
SequenceReverse, -0.5 (truncated to 0).
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "seq")


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def save(name, op, params, inputs, num_diff):
    """inputs[:num_diff] get gradients (none: the forward only)."""
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays[:num_diff]:
        a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(*arrays, **params)
    d = {"out0": out}
    if num_diff:
        rng = np.random.RandomState(len(name) * 7919 + 13)
        d["og0"] = mx.nd.array(rand(rng, out.shape))
        out.backward(d["og0"])
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        if i < num_diff:
            d["grad%d" % i] = a.grad
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s -> %s" % (name, op, params, out.shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(23)
    L = dict(use_sequence_length=True)
    lens = lambda *v: np.array(v, dtype=np.float32)

    save("mask_nolen", "SequenceMask", dict(value=3), [rand(rng, (4, 3, 2))], 1)
    save("mask_len", "SequenceMask", dict(L, value=-1),
         [rand(rng, (5, 3, 2)), lens(2.7, 7, 0)], 1)
    save("mask_axis1", "SequenceMask", dict(L, axis=1, value=0.5),
         [rand(rng, (3, 4, 2, 2)), lens(1, -0.5, 9)], 1)
    save("mask_2d", "SequenceMask", L, [rand(rng, (4, 3)), lens(1, 3, 2)], 1)

    # without sequence_length MXNet 1.9.1's SequenceLast backward reads memory it does not
    # own (zeros, a corrupted heap or a crash): the forward only, the gradient is checked
    # by finite differences
    save("last_nolen", "SequenceLast", {}, [rand(rng, (4, 3, 2))], 0)
    save("last_len", "SequenceLast", L, [rand(rng, (5, 3, 2)), lens(2.7, 5, 1)], 1)
    save("last_axis1", "SequenceLast", dict(L, axis=1),
         [rand(rng, (3, 4, 2, 2)), lens(1, 4, 2.5)], 1)
    save("last_axis1_nolen", "SequenceLast", dict(axis=1), [rand(rng, (2, 3, 4))], 0)
    save("last_2d", "SequenceLast", L, [rand(rng, (4, 3)), lens(4, 1, 2)], 1)

    save("reverse_nolen", "SequenceReverse", {}, [rand(rng, (4, 3, 2))], 1)
    save("reverse_len", "SequenceReverse", L,
         [rand(rng, (5, 3, 2)), lens(2.7, 5, 0)], 1)
    save("reverse_4d", "SequenceReverse", L,
         [rand(rng, (4, 2, 3, 2)), lens(-0.5, 3)], 1)
    save("reverse_2d", "SequenceReverse", L, [rand(rng, (4, 3)), lens(1, 4, 3)], 1)

    save("crop_hw", "Crop", dict(num_args=1, h_w=(2, 3), offset=(1, 2)),
         [rand(rng, (2, 3, 5, 6))], 1)
    save("crop_corner", "Crop", dict(num_args=1, h_w=(2, 3), offset=(3, 3)),
         [rand(rng, (1, 2, 5, 6))], 1)
    save("crop_center", "Crop", dict(num_args=1, h_w=(4, 3), center_crop=True),
         [rand(rng, (2, 2, 5, 6))], 1)
    save("crop_like", "Crop", dict(num_args=2, offset=(1, 0)),
         [rand(rng, (1, 2, 5, 6)), rand(rng, (3, 7, 2, 4))], 2)
    save("crop_like_center", "Crop", dict(num_args=2, center_crop=True),
         [rand(rng, (2, 1, 6, 7)), rand(rng, (1, 1, 3, 3))], 2)


if __name__ == "__main__":
    main()
