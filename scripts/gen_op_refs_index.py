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
node receives axis=''), so their cases give axis=-1, which is the default. Its gather_nd
with 1-D indices (a result without axes) hangs, so that case is checked in C only.
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

    # take: fractions truncate toward zero; -1.5, -1, 3 and 7 are out of range for 4 rows
    # (clipped to the ends, or wrapped); repeated rows sum their gradients
    idx = f32([[-1.5, -1, 0.7], [2.9, 4, 7]])
    save("take_clip", "take", {}, [rand(rng, (4, 3)), idx])
    save("take_wrap", "take", dict(mode="wrap"), [rand(rng, (4, 3)), idx])
    save("take_raise", "take", dict(mode="raise"), [rand(rng, (4, 3)), f32([2, 0, 2.5, 0])])
    save("take_axis1", "take", dict(axis=1, mode="wrap"),
         [rand(rng, (2, 5, 3)), f32([[0, 4], [-1, 2], [6, 1]])])
    save("take_axis_neg", "take", dict(axis=-1), [rand(rng, (2, 3, 4)), f32([3, 0, 3, 9])])

    # pick: along the last axis by default, out-of-range indices clipped or wrapped
    pidx = f32([0, -1, 9, 2.5])
    save("pick_clip", "pick", {}, [rand(rng, (4, 5)), pidx])
    save("pick_wrap", "pick", dict(axis=1, mode="wrap"), [rand(rng, (4, 5)), pidx])
    save("pick_axis0_keep", "pick", dict(axis=0, keepdims=True),
         [rand(rng, (4, 3)), f32([[1, 3, 0]])])
    save("pick_3d", "pick", dict(axis=-2), [rand(rng, (2, 3, 4)), f32([[0, 1, 2, 1], [2, 2, 0, -5]])])
    save("pick_index_kept", "pick", dict(axis=1), [rand(rng, (3, 4)), f32([[1], [3], [0]])])

    # one_hot: a fraction, -0.5 (truncated to 0), and indices outside [0, depth)
    save("one_hot", "one_hot", dict(depth=4, on_value=2.5, off_value=-1),
         [f32([[0, 2.7, -1], [5, 3, -0.5]])])
    save("one_hot_default", "one_hot", dict(depth=3), [f32([2, 0, 1, 1])])

    # argmax, argmin: ties (the first occurrence wins), NaN (counts as the extreme)
    tied = f32([[1, 3, 3, 2], [5, 5, 1, 0], [0, 0, 0, 0]])
    save("argmax_axis1", "argmax", dict(axis=1), [tied])
    save("argmax_none", "argmax", {}, [tied])
    save("argmax_none_keep", "argmax", dict(keepdims=True), [tied])
    save("argmax_neg_keep", "argmax", dict(axis=-2, keepdims=True), [ties(rng, (2, 3, 4))])
    save("argmin_axis0", "argmin", dict(axis=0), [ties(rng, (4, 3))])
    save("argmin_none", "argmin", {}, [tied])
    nan = f32([[NAN, 1, 2], [1, NAN, NAN], [3, 1, 3]])
    save("argmax_nan", "argmax", dict(axis=1), [nan])
    save("argmin_nan", "argmin", dict(axis=-1), [nan])
    save("argmax_channel", "argmax_channel", {}, [tied], backward=False)
    save("argmax_channel_3d", "argmax_channel", {}, [ties(rng, (2, 3, 4))], backward=False)

    # topk: ties (the first occurrence first, both ways), every ret_typ, axis None, k < 1
    t35 = ties(rng, (3, 5))
    save("topk_default", "topk", {}, [t35])
    save("topk_both", "topk", dict(k=3, ret_typ="both"), [t35])
    save("topk_value_asc", "topk", dict(axis=0, k=2, ret_typ="value", is_ascend=True),
         [ties(rng, (4, 3))])
    save("topk_mask", "topk", dict(axis=1, k=2, ret_typ="mask"), [ties(rng, (2, 4, 3))])
    save("topk_none", "topk", dict(axis=None, k=4, ret_typ="both"), [ties(rng, (2, 3))])
    save("topk_all", "topk", dict(k=0, ret_typ="value"), [rand(rng, (2, 4))])
    save("topk_neg_axis", "topk", dict(axis=-2, k=2, ret_typ="value"), [rand(rng, (2, 3, 4))])

    # sort, argsort (axis given: see the docstring)
    save("sort_last", "sort", dict(axis=-1), [t35])
    save("sort_desc", "sort", dict(axis=0, is_ascend=False), [ties(rng, (4, 3))])
    save("sort_3d", "sort", dict(axis=1), [rand(rng, (2, 4, 3))])
    save("argsort_last", "argsort", dict(axis=-1), [t35])
    save("argsort_desc", "argsort", dict(axis=1, is_ascend=False), [ties(rng, (2, 4, 3))])

    # gather_nd: fractions truncate, a repeated position sums its gradients; slices when
    # indices cover fewer axes than data has. Negative positions count from the end, but
    # MXNet's backward drops their gradients (a bug: mxc gives them, as finite differences
    # do), so the cases with them are compared forward only.
    save("gather_nd_2d", "gather_nd", {},
         [rand(rng, (3, 4)), f32([[0, 2, 2, 1.7, 0], [1, 3, 2, 0, 1]])])
    save("gather_nd_slices", "gather_nd", {}, [rand(rng, (3, 4, 2)), f32([[[0, 2], [2, 0]]])])
    save("gather_nd_neg", "gather_nd", {},
         [rand(rng, (3, 4)), f32([[0, -1, -3, 1], [-1, -4, 2, -2]])], backward=False)

if __name__ == "__main__":
    main()
