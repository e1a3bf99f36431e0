#!/usr/bin/env python3
"""Reference data for tests/check_op_index.c: where, take, pick, one_hot, argmax, argmin,
argmax_channel, topk, sort and argsort computed by MXNet 1.9.1 (the oracle), with ties,
NaN for argmax/argmin and where, out-of-range and fractional indices for clip and wrap,
and negative axes.

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/V/bin/python scripts/gen_op_refs_index.py

Writes tests/data/ops/index/<case>.params, one per case, each an mx.nd.save dict of
float32 arrays: in0, in1, ... (the operator's inputs), out0, out1, ... (the forward
outputs; their shapes are the shape-inference reference), og0, og1, ... (head gradients)
and grad0, grad1, ... (the input gradients for them, recorded with autograd; none for
argmax_channel, which MXNet does not differentiate). The parameters of each case are
repeated in the C test's case table.

MXNet 1.9.1's sort and argsort fail under autograd with the default axis (their backward
node receives axis=''), so their cases give axis=-1, which is the default.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "index")
NAN = float("nan")


def rand(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def ties(rng, shape, hi=3):
    """Small integers: many equal values in a row."""
    return rng.randint(0, hi, size=shape).astype(np.float32)


def f32(x):
    return np.array(x, dtype=np.float32)


def save(name, op, params, inputs, backward=True):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    if backward:
        for a in arrays:
            a.attach_grad()
        with mx.autograd.record():
            out = getattr(mx.nd, op)(*arrays, **params)
    else:
        out = getattr(mx.nd, op)(*arrays, **params)
    outs = out if isinstance(out, (list, tuple)) else [out]
    rng = np.random.RandomState(len(name) * 7919 + 13)
    ogs = [mx.nd.array(rand(rng, o.shape)) for o in outs]
    d = {}
    if backward:
        mx.autograd.backward(outs, ogs)
        for i, a in enumerate(arrays):
            d["grad%d" % i] = a.grad
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
    for k, (o, g) in enumerate(zip(outs, ogs)):
        d["out%d" % k] = o.astype("float32")
        d["og%d" % k] = g
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-20s %s %s -> %s" % (name, op, params, [o.shape for o in outs]))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(19)

    # where: NaN and -0.0 conditions; a 1-D condition over the first axis
    cond = f32([[1, 0, -2, 0.5], [0, NAN, -0.0, 0], [3, 0, 0, 1]])
    save("where_same", "where", {}, [cond, rand(rng, (3, 4)), rand(rng, (3, 4))])
    save("where_1d", "where", {}, [f32([1, 0, 2.5]), rand(rng, (3, 2, 2)), rand(rng, (3, 2, 2))])


if __name__ == "__main__":
    main()
