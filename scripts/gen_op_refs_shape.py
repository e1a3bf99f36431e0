#!/usr/bin/env python3
"""Reference data for tests/check_op_shape.c: Flatten, Reshape (every special value of
its shape language, forward and reverse), transpose, expand_dims, Concat, SliceChannel,
ElementWiseSum and Embedding computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_shape.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/shape/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays: in0, in1, ... (the operator's inputs), out0, out1, ...
(the forward outputs; their shapes are the shape-inference reference), og0, og1, ...
(head gradients) and grad0, grad1, ... (the input gradients for them; Embedding has only
grad1, MXNet refuses a gradient for its indices). The parameters of each case are
repeated in the C test's case table.

MXNet 1.9.1's Reshape fills a -1 at its index in `shape` rather than in the result, so a
-1 after a -2 or -4 gives a shape of the wrong size (and writes out of bounds); such
cases are not used (the script asserts every Reshape keeps the element count).
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "shape")


def rand(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def save(name, op, params, inputs, no_grad=()):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for i, a in enumerate(arrays):
        if i not in no_grad:
            a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(*arrays, **params)
    outs = out if isinstance(out, (list, tuple)) else [out]
    if op == "Reshape":
        assert outs[0].size == arrays[0].size, (name, outs[0].shape)
    rng = np.random.RandomState(len(name) * 7919 + 13)
    ogs = [mx.nd.array(rand(rng, o.shape)) for o in outs]
    mx.autograd.backward(outs, ogs)
    d = {}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        if i not in no_grad:
            d["grad%d" % i] = a.grad
    for k, (o, g) in enumerate(zip(outs, ogs)):
        d["out%d" % k] = o.astype("float32")
        d["og%d" % k] = g
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s -> %s" % (name, op, params, [o.shape for o in outs]))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(7)
    x4 = rand(rng, (2, 3, 4, 5))

    save("flatten_3d", "Flatten", {}, [rand(rng, (2, 3, 4))])
    save("flatten_1d", "Flatten", {}, [rand(rng, (5,))])

    # Reshape: each special value, and reverse where it changes the result
    reshapes = [
        ("reshape_plain", dict(shape=(5, 4, 6))),
        ("reshape_copy_infer", dict(shape=(0, -1))),
        ("reshape_copy_infer_rev", dict(shape=(0, -1), reverse=True)),
        ("reshape_infer_copy", dict(shape=(-1, 0))),
        ("reshape_infer_copy_rev", dict(shape=(-1, 0), reverse=True)),
        ("reshape_infer_only", dict(shape=(-1,))),
        ("reshape_rest", dict(shape=(-2,))),
        ("reshape_rest_ones", dict(shape=(-2, 1, 1))),
        ("reshape_merge_rest", dict(shape=(-3, -2))),
        ("reshape_merge_twice", dict(shape=(-3, -3))),
        ("reshape_copy_merge", dict(shape=(0, 0, -3))),
        ("reshape_copy_merge_rev", dict(shape=(-3, 0, 0), reverse=True)),
        ("reshape_split", dict(shape=(2, -4, 1, 3, -2))),
        ("reshape_split_infer_l", dict(shape=(-4, -1, 2, -2))),
        ("reshape_split_infer_r", dict(shape=(0, -4, 3, -1, -2))),
        ("reshape_split_rev", dict(shape=(-2, 2, 2, -4, 0), reverse=True)),
        ("reshape_infer_last", dict(shape=(2, 3, 4, 5, -1))),
    ]
    for name, params in reshapes:
        save(name, "Reshape", params, [x4])

    save("transpose_default", "transpose", {}, [rand(rng, (2, 3, 4))])
    save("transpose_axes", "transpose", dict(axes=(1, 0, 2)), [rand(rng, (2, 3, 4))])
    save("transpose_4d", "transpose", dict(axes=(0, 2, 3, 1)), [rand(rng, (2, 3, 2, 4))])

    save("expand_dims_0", "expand_dims", dict(axis=0), [rand(rng, (2, 3))])
    save("expand_dims_1", "expand_dims", dict(axis=1), [rand(rng, (2, 3))])
    save("expand_dims_neg", "expand_dims", dict(axis=-1), [rand(rng, (2, 3))])
    save("expand_dims_neg3", "expand_dims", dict(axis=-3), [rand(rng, (2, 3))])

    save("concat_dim1", "Concat", dict(num_args=3, dim=1),
         [rand(rng, (2, 1, 3)), rand(rng, (2, 2, 3)), rand(rng, (2, 3, 3))])
    save("concat_dim0", "Concat", dict(num_args=2, dim=0),
         [rand(rng, (1, 4)), rand(rng, (3, 4))])
    save("concat_neg", "Concat", dict(num_args=2, dim=-1),
         [rand(rng, (2, 2, 3)), rand(rng, (2, 2, 1))])

    save("slice_axis1", "SliceChannel", dict(num_outputs=3), [rand(rng, (2, 6, 2))])
    save("slice_axis0", "SliceChannel", dict(num_outputs=2, axis=0), [rand(rng, (4, 3))])
    save("slice_squeeze", "SliceChannel", dict(num_outputs=3, axis=-1, squeeze_axis=True),
         [rand(rng, (2, 2, 3))])

    save("sum_three", "ElementWiseSum", dict(num_args=3),
         [rand(rng, (2, 3)), rand(rng, (2, 3)), rand(rng, (2, 3))])
    save("sum_one", "ElementWiseSum", dict(num_args=1), [rand(rng, (4,))])

    # indices: repeats (scatter-add), truncation (2.7 -> 2) and clipping (-1, 9 -> 0, 4)
    idx = np.array([[0, 2.7, 4], [1, 2, 2], [-1, 9, 3]], dtype=np.float32)
    save("embedding", "Embedding", dict(input_dim=5, output_dim=4),
         [idx, rand(rng, (5, 4))], no_grad=(0,))
    save("embedding_1d", "Embedding", dict(input_dim=3, output_dim=2),
         [np.array([2, 0, 2, 1], dtype=np.float32), rand(rng, (3, 2))], no_grad=(0,))


if __name__ == "__main__":
    main()
