#!/usr/bin/env python3
"""Reference data for tests/check_op_math.c: the element-wise math functions, comparisons
and logical operators (plain, _scalar and broadcast_ forms), broadcast_maximum/minimum/
power/hypot and the reductions min, prod, nansum, nanprod and norm, computed by MXNet
1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/V/bin/python scripts/gen_op_refs_math.py

(/tmp/V: a virtual environment with mxnet==1.9.1 and 'numpy<1.24'). Writes
tests/data/ops/math/<case>.params, one per case, each an mx.nd.save dict of float32
arrays: in0, in1 (the operator's inputs), out0 (the forward output), og0 (a head
gradient) and grad0, grad1 (the input gradients for og0). The parameters of each case are
repeated in the C test's case table. Inputs include the edges of each function's domain
(log1p at -1 and below, rounding of halves, ties of comparisons and extrema, zeros in
products and norms, NaN for the nan- reductions), where MXNet's results are infinities
or NaN and mxc's must be the same. oneDNN is switched off so that the native kernels are
the reference.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "math")


def op_of(name):
    return getattr(mx.nd, name, None) or getattr(mx.nd._internal, name)


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def ints(rng, shape, lo, hi):
    """Small integers in [lo, hi]: many ties."""
    return rng.randint(lo, hi + 1, size=shape).astype(np.float32)


def with_specials(rng, specials, lo, hi, n=12):
    """`specials` followed by uniform values in [lo, hi), n in all."""
    s = np.array(specials, dtype=np.float32)
    return np.concatenate([s, rand(rng, (max(n - s.size, 0),), lo, hi)])


def save(name, op, params, inputs):
    arrays = [mx.nd.array(x, dtype="float32") for x in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        out = op_of(op)(*arrays, **params)
    rng = np.random.RandomState(len(name) * 7919 + 13)
    og = rand(rng, out.shape)
    out.backward(mx.nd.array(og))
    d = {"out0": out.astype("float32"), "og0": mx.nd.array(og)}
    for i, a in enumerate(arrays):
        d["in%d" % i] = a
        d["grad%d" % i] = a.grad
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-24s %s %s -> %s" % (name, op, params, out.shape))


HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 2.0, -3.0, 0.49999997]


def unary(rng):
    # (op, specials, lo, hi): random values in [lo, hi) after the specials
    table = [
        ("log1p", [-1.0, -1.5, -0.5, 0.0, -0.999, 1e-4], -0.9, 4.0),
        ("expm1", [0.0, 1e-5, -1e-5], -3.0, 3.0),
        ("floor", HALVES, -3.0, 3.0),
        ("ceil", HALVES, -3.0, 3.0),
        ("round", HALVES, -3.0, 3.0),
        ("rint", HALVES, -3.0, 3.0),
        ("trunc", HALVES, -3.0, 3.0),
        ("fix", HALVES, -3.0, 3.0),
        ("reciprocal", [-2.0, -0.5, 4.0], 0.5, 2.0),
        ("erf", [0.0, -3.0, 3.0], -2.0, 2.0),
        ("softsign", [0.0, -5.0], -3.0, 3.0),
        ("cbrt", [0.0, -8.0, 27.0, -0.001], -8.0, 8.0),
        ("log2", [1.0, 8.0, 0.125], 0.1, 4.0),
        ("log10", [1.0, 100.0, 0.01], 0.1, 4.0),
        ("tan", [0.0, 1.5], -1.2, 1.2),
        ("arcsin", [1.0, -1.0, 0.0, 1.5], -0.95, 0.95),
        ("arccos", [1.0, -1.0, 0.0, -1.5], -0.95, 0.95),
        ("arctan", [0.0, 50.0], -3.0, 3.0),
        ("sinh", [0.0], -2.0, 2.0),
        ("cosh", [0.0], -2.0, 2.0),
        ("arcsinh", [0.0, -20.0], -3.0, 3.0),
        ("arccosh", [1.0, 0.5], 1.05, 4.0),
        ("arctanh", [0.0, 1.0, -1.0], -0.9, 0.9),
        ("degrees", [0.0, 3.14159265], -4.0, 4.0),
        ("radians", [0.0, 180.0], -4.0, 4.0),
        ("logical_not", [0.0, -0.0, 1.0, -2.0, 0.5], -1.0, 1.0),
    ]
    for op, specials, lo, hi in table:
        x = with_specials(rng, specials, lo, hi).reshape(3, 4)
        save(op, op, {}, [x])
    # hard_sigmoid: the corners (alpha x + beta = 0 or 1) and either side
    x = with_specials(rng, [-2.5, 2.5, 0.0, -3.0, 3.0, -2.4, 2.4], -4.0, 4.0).reshape(3, 4)
    save("hard_sigmoid", "hard_sigmoid", {}, [x])
    save("hard_sigmoid_ab", "hard_sigmoid", dict(alpha=0.5, beta=0.25), [x])


def comparisons(rng):
    # the scalar forms, with the scalar itself among the inputs
    x = with_specials(rng, [0.5, 0.5, -0.5, 0.0, 1.0], -1.0, 1.0).reshape(3, 4)
    for op in ["_equal_scalar", "_not_equal_scalar", "_greater_scalar",
               "_greater_equal_scalar", "_lesser_scalar", "_lesser_equal_scalar"]:
        save(op, op, dict(scalar=0.5), [x])
    xl = with_specials(rng, [0.0, 2.0, -1.0, 0.0], -1.0, 1.0).reshape(3, 4)
    for op in ["_logical_and_scalar", "_logical_or_scalar", "_logical_xor_scalar"]:
        save(op, op, dict(scalar=2.0), [xl])
        save(op + "_0", op, dict(scalar=0.0), [xl])
    save("_hypot_scalar", "_hypot_scalar", dict(scalar=-1.5),
         [with_specials(rng, [0.0, 3.0, -2.0], -3.0, 3.0).reshape(3, 4)])
    # same-shape binary forms: small integers, so ties are common
    a, b = ints(rng, (3, 5), -1, 2), ints(rng, (3, 5), -1, 2)
    for op in ["_equal", "_not_equal", "_greater", "_greater_equal", "_lesser",
               "_lesser_equal", "_logical_and", "_logical_or", "_logical_xor"]:
        save(op, op, {}, [a, b])
    ha, hb = rand(rng, (3, 4), -3.0, 3.0), rand(rng, (3, 4), -3.0, 3.0)
    ha[0, 0], hb[0, 0] = 0.0, 0.0  # 0/0: NaN gradients in MXNet
    ha[0, 1], hb[0, 1] = 3.0, 0.0
    save("_hypot", "_hypot", {}, [ha, hb])


def broadcasts(rng):
    for op in ["broadcast_maximum", "broadcast_minimum"]:
        a, b = ints(rng, (2, 3, 4), -2, 2), ints(rng, (1, 3, 1), -2, 2)
        save(op, op, {}, [a, b])
        save(op + "_pad", op, {}, [rand(rng, (3, 1)), rand(rng, (2, 1, 4))])
    save("broadcast_power", "broadcast_power", {},
         [rand(rng, (2, 3, 4), 0.5, 2.0), rand(rng, (1, 3, 1), -2.0, 2.0)])
    save("broadcast_power_lhs", "broadcast_power", {},
         [rand(rng, (1, 4), 0.5, 2.0), rand(rng, (3, 4), -2.0, 2.0)])
    save("broadcast_hypot", "broadcast_hypot", {}, [rand(rng, (3, 1)), rand(rng, (1, 4))])
    for op in ["broadcast_equal", "broadcast_not_equal", "broadcast_greater",
               "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
               "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor"]:
        save(op, op, {}, [ints(rng, (2, 3, 4), -1, 1), ints(rng, (3, 1), -1, 1)])


def reductions(rng):
    ties = np.array([[1, -3, -3, 0], [2, 2, 2, 2], [-1, 5, -4, -4]], dtype=np.float32)
    x = rand(rng, (2, 3, 4))
    save("min_axis1", "min", dict(axis=1), [x])
    save("min_all", "min", {}, [x])
    save("min_exclude_keep", "min", dict(axis=(0, 2), exclude=True, keepdims=True), [x])
    save("min_ties", "min", dict(axis=1), [ties])
    p = rand(rng, (2, 3, 4), 0.5, 1.5) * np.sign(rand(rng, (2, 3, 4)))
    save("prod_axis2", "prod", dict(axis=2), [p])
    save("prod_all_keep", "prod", dict(keepdims=True), [rand(rng, (2, 3), 0.5, 1.5)])
    save("prod_axes02", "prod", dict(axis=(0, 2)), [p])
    z = rand(rng, (3, 4), 0.5, 1.5)
    z[0, 1] = 0.0  # one zero: y = 0, gradient y / x: 0 beside it, NaN at it (MXNet's)
    z[2, 0] = z[2, 3] = 0.0
    save("prod_zero", "prod", dict(axis=1), [z])
    n = rand(rng, (3, 4))
    n[0, 1] = n[1, 0] = n[1, 2] = np.nan
    n[2, :] = np.nan
    save("nansum_axis1", "nansum", dict(axis=1), [n])
    save("nansum_all", "nansum", {}, [n])
    save("nansum_axis0_keep", "nansum", dict(axis=0, keepdims=True), [n])
    m = rand(rng, (3, 4), 0.5, 1.5)
    m[0, 1] = m[1, 3] = np.nan
    m[2, :] = np.nan
    save("nanprod_axis1", "nanprod", dict(axis=1), [m])
    save("nanprod_exclude", "nanprod", dict(axis=1, exclude=True), [m])
    v = rand(rng, (2, 3, 4))
    save("norm_all", "norm", {}, [v])
    save("norm_axis1", "norm", dict(axis=1), [v])
    save("norm_axis_neg_keep", "norm", dict(axis=-1, keepdims=True), [v])
    save("norm_axes01", "norm", dict(axis=(0, 1)), [v])
    save("norm1_all", "norm", dict(ord=1), [v])
    save("norm1_axis2_keep", "norm", dict(ord=1, axis=2, keepdims=True), [v])
    w = rand(rng, (3, 4))
    w[1, :] = 0.0  # a zero row: ord 2 gives 0 / 0 (NaN) gradients, ord 1 zeros
    w[0, 2] = 0.0
    save("norm_zero_row", "norm", dict(axis=1), [w])
    save("norm1_zero_row", "norm", dict(ord=1, axis=1), [w])


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(15)
    unary(rng)
    comparisons(rng)
    broadcasts(rng)
    reductions(rng)


if __name__ == "__main__":
    main()
