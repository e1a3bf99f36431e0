#!/usr/bin/env python3
"""Reference data for tests/check_op_tensor.c: _copy, squeeze, SwapAxis, flip, slice (None
entries, negative indices and steps, clamping), slice_axis, slice_like, stack, tile,
repeat, broadcast_to and broadcast_like computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/V/bin/python scripts/gen_op_refs_tensor.py

(/tmp/V: python3 -m venv /tmp/V && /tmp/V/bin/pip install mxnet==1.9.1 'numpy<1.24').
Writes tests/data/ops/tensor/<case>.params, one per case, each an mx.nd.save dict of
float32 arrays: in0, in1, ... (the operator's inputs), out0 (the forward output; its shape
is the shape-inference reference), og0 (a random head gradient) and grad0, grad1, ... (the
input gradients for it). The parameters of each case are repeated in the C test's case
table.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "tensor")


def rand(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def save(name, op, params, inputs):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays:
        a.attach_grad()
    fn = getattr(mx.nd, op) if hasattr(mx.nd, op) else getattr(mx.nd._internal, op)
    with mx.autograd.record():
        out = fn(*arrays, **params)
    rng = np.random.RandomState(len(name) * 7919 + 13)
    og = mx.nd.array(rand(rng, out.shape))
    out.backward(og)
    d = {"out0": out, "og0": og}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s %s -> %s" % (name, op, params, out.shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(11)
    x = rand(rng, (2, 3, 4))

    save("copy", "_copy", {}, [rand(rng, (2, 3))])

    save("squeeze_all", "squeeze", {}, [rand(rng, (1, 3, 1, 2))])
    save("squeeze_axis", "squeeze", dict(axis=(0,)), [rand(rng, (1, 3, 1, 2))])
    save("squeeze_neg", "squeeze", dict(axis=(-2, 0)), [rand(rng, (1, 3, 1, 2))])
    save("squeeze_to_one", "squeeze", {}, [rand(rng, (1, 1))])

    save("swapaxis", "SwapAxis", dict(dim1=0, dim2=2), [x])
    save("swapaxis_neg", "SwapAxis", dict(dim1=-1, dim2=1), [rand(rng, (2, 3, 2, 4))])
    save("swapaxis_same", "SwapAxis", {}, [x])

    save("flip_0", "flip", dict(axis=(0,)), [x])
    save("flip_02", "flip", dict(axis=(0, 2)), [x])
    save("flip_twice", "flip", dict(axis=(1, 1)), [x])

    save("slice_plain", "slice", dict(begin=(0, 1), end=(2, 3)), [x])
    save("slice_none", "slice", dict(begin=(None, 1, None), end=(None, None, 2)), [x])
    save("slice_neg", "slice", dict(begin=(-1, -3), end=(None, -1)), [x])
    save("slice_step", "slice", dict(begin=(None, None, 1), end=(None, None, None),
                                     step=(1, 2, 2)), [x])
    save("slice_step_neg", "slice", dict(begin=(None, -1), end=(None, 0), step=(None, -2)), [x])
    save("slice_reverse_all", "slice", dict(begin=(None, None, None), end=(None, None, None),
                                            step=(-1, -2, -3)), [x])
    save("slice_clamp", "slice", dict(begin=(0, -5), end=(2, 10)), [x])
    save("slice_clamp_neg", "slice", dict(begin=(None, 7), end=(None, -9), step=(1, -1)), [x])

    save("slice_axis_end_none", "slice_axis", dict(axis=1, begin=1, end=None), [x])
    save("slice_axis_neg", "slice_axis", dict(axis=-1, begin=-3, end=-1), [x])
    save("slice_axis_0", "slice_axis", dict(axis=0, begin=0, end=1), [x])

    save("slice_like_all", "slice_like", {}, [x, rand(rng, (1, 2, 3))])
    save("slice_like_axes", "slice_like", dict(axes=(0, 2)), [x, rand(rng, (1, 7, 3))])
    save("slice_like_neg", "slice_like", dict(axes=(-1,)), [x, rand(rng, (1, 1, 2))])

    save("stack_0", "stack", dict(num_args=2), [rand(rng, (2, 3)), rand(rng, (2, 3))])
    save("stack_last", "stack", dict(num_args=3, axis=-1),
         [rand(rng, (2, 3)), rand(rng, (2, 3)), rand(rng, (2, 3))])
    save("stack_mid", "stack", dict(num_args=2, axis=1), [rand(rng, (2, 3, 2)),
                                                          rand(rng, (2, 3, 2))])

    save("tile_last", "tile", dict(reps=(2,)), [rand(rng, (2, 3))])
    save("tile_pad_data", "tile", dict(reps=(2, 1, 3)), [rand(rng, (2, 3))])
    save("tile_pad_reps", "tile", dict(reps=(3,)), [rand(rng, (1, 2, 2))])
    save("tile_both", "tile", dict(reps=(2, 3)), [rand(rng, (3, 2))])
    save("tile_none", "tile", dict(reps=()), [rand(rng, (2, 2))])

    save("repeat_flat", "repeat", dict(repeats=2), [rand(rng, (2, 3))])
    save("repeat_axis", "repeat", dict(repeats=3, axis=1), [rand(rng, (2, 3, 2))])
    save("repeat_neg", "repeat", dict(repeats=2, axis=-1), [rand(rng, (2, 3))])

    save("broadcast_to_keep", "broadcast_to", dict(shape=(2, 0, 4)), [rand(rng, (1, 3, 1))])
    save("broadcast_to_last", "broadcast_to", dict(shape=(3, 5)), [rand(rng, (3, 1))])
    save("broadcast_to_all", "broadcast_to", dict(shape=(4, 5)), [rand(rng, (1, 1))])

    save("broadcast_like_all", "broadcast_like", {}, [rand(rng, (1, 3, 1)), rand(rng, (2, 3, 4))])
    save("broadcast_like_axes", "broadcast_like", dict(lhs_axes=(0, 2), rhs_axes=(1, 0)),
         [rand(rng, (1, 3, 1)), rand(rng, (4, 2))])
    save("broadcast_like_neg", "broadcast_like", dict(lhs_axes=(-1,), rhs_axes=(-2,)),
         [rand(rng, (2, 3, 1)), rand(rng, (5, 2))])


if __name__ == "__main__":
    main()
