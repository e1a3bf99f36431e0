#!/usr/bin/env python3
"""Reference data for tests/check_op_reduce.c: sum, mean, max, broadcast_add/sub/mul/div,
dot, batch_dot and clip computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_reduce.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/reduce/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays: in0, in1 (the operator's inputs), out0 (the forward
output), og0 (a head gradient) and grad0, grad1 (the input gradients for og0). The
parameters of each case are repeated in the C test's case table. oneDNN is switched off
(MXNET_MKLDNN_ENABLED=0) so that the native kernels are the reference.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "reduce")


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def distinct(rng, shape):
    """Values without ties (max has a unique maximum)."""
    n = int(np.prod(shape))
    v = rng.permutation(n).astype(np.float32) / n * 2 - 1
    return v.reshape(shape)


def save(name, op, params, inputs):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(*arrays, **params)
    rng = np.random.RandomState(len(name) * 7919 + 13)
    og = rand(rng, out.shape)
    out.backward(mx.nd.array(og))
    d = {"out0": out.astype("float32"), "og0": mx.nd.array(og)}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-18s %s %s -> %s" % (name, op, params, out.shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(7)

    # reductions
    x = rand(rng, (2, 3, 4))
    save("sum_all", "sum", {}, [x])
    save("sum_axis1_keep", "sum", dict(axis=1, keepdims=True), [x])
    save("sum_axes02", "sum", dict(axis=(0, 2)), [x])
    save("sum_exclude", "sum", dict(axis=1, exclude=True), [x])
    save("sum_neg", "sum", dict(axis=-1), [rand(rng, (3, 1, 5))])
    save("mean_all_keep", "mean", dict(keepdims=True), [x])
    save("mean_axes12", "mean", dict(axis=(1, 2)), [rand(rng, (2, 3, 2, 3))])
    save("mean_axis0", "mean", dict(axis=0), [x])
    xd = distinct(rng, (3, 4, 5))
    save("max_axis1", "max", dict(axis=1), [xd])
    save("max_all", "max", {}, [xd])
    save("max_exclude_keep", "max", dict(axis=(0, 2), exclude=True, keepdims=True), [xd])
    ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 4, 5]], dtype=np.float32)
    save("max_ties", "max", dict(axis=1), [ties])

    # broadcasting
    save("badd", "broadcast_add", {}, [rand(rng, (2, 3, 4)), rand(rng, (1, 3, 1))])
    save("badd_same", "broadcast_add", {}, [rand(rng, (3, 4)), rand(rng, (3, 4))])
    save("bsub", "broadcast_sub", {}, [rand(rng, (3, 1)), rand(rng, (1, 4))])
    save("bmul_pad", "broadcast_mul", {}, [rand(rng, (2, 1, 3)), rand(rng, (4, 1))])
    save("bmul_same", "broadcast_mul", {}, [rand(rng, (2, 5)), rand(rng, (2, 5))])
    save("bdiv", "broadcast_div", {},
         [rand(rng, (2, 3, 4)), rand(rng, (2, 1, 4), 0.5, 1.5)])
    save("bdiv_lhs", "broadcast_div", {},
         [rand(rng, (1, 4)), rand(rng, (3, 4), 0.5, 1.5)])

    # products
    save("dot_2d", "dot", {}, [rand(rng, (3, 4)), rand(rng, (4, 5))])
    save("dot_t", "dot", dict(transpose_a=True, transpose_b=True),
         [rand(rng, (4, 3)), rand(rng, (5, 4))])
    save("dot_nd", "dot", {}, [rand(rng, (2, 3, 4)), rand(rng, (4, 2, 3))])
    save("dot_nd_t", "dot", dict(transpose_a=True, transpose_b=True),
         [rand(rng, (3, 2, 4)), rand(rng, (5, 3))])
    save("dot_vv", "dot", {}, [rand(rng, (6,)), rand(rng, (6,))])
    save("dot_vm", "dot", {}, [rand(rng, (4,)), rand(rng, (4, 5))])
    save("dot_mv_t", "dot", dict(transpose_a=True), [rand(rng, (4, 3)), rand(rng, (4,))])
    save("bdot", "batch_dot", {}, [rand(rng, (2, 3, 4)), rand(rng, (2, 4, 5))])
    save("bdot_t", "batch_dot", dict(transpose_a=True, transpose_b=True),
         [rand(rng, (2, 4, 3)), rand(rng, (2, 5, 4))])
    save("bdot_4d", "batch_dot", dict(transpose_b=True),
         [rand(rng, (2, 2, 3, 4)), rand(rng, (2, 2, 5, 4))])

    # clip (the bounds themselves appear in the data: the gradient passes there)
    c = rand(rng, (4, 5), -2, 2)
    c[0, :3] = [-1.0, 1.0, 0.5]
    save("clip", "clip", dict(a_min=-1.0, a_max=1.0), [c])
    save("clip_inverted", "clip", dict(a_min=0.5, a_max=-0.5), [c])


if __name__ == "__main__":
    main()
