#!/usr/bin/env python3
"""Reference data for tests/check_op_dtype.c: float16 conversions, Cast between every pair
of float32, float64, float16, uint8, int32, int8 and int64 (forward and backward), and
the multi-precision SGD updates mp_sgd_update and mp_sgd_mom_update, computed by MXNet
1.9.1 (the oracle; numpy for the float16 tables, which MXNet's Cast is checked to match).

Run once, from the repository root, and commit the output:

    /tmp/V/bin/python scripts/gen_op_refs_dtype.py

(/tmp/V: python3 -m venv /tmp/V && /tmp/V/bin/pip install mxnet==1.9.1 'numpy<1.24').
Writes tests/data/ops/dtype/:
  half.params      f (float32: the values either side of, and on, every rounding boundary
                   of a sample of halves, plus zeros, infinities, NaNs with payloads) and
                   h (float16: numpy's f.astype(float16)); hb (every 61st half, float16)
                   and hf (its float32 value).
  cast_<src>.params  in (src dtype), and for each dst: out_<dst> = Cast(in, dst),
                   og_<dst> (a head gradient, dst dtype) and grad_<dst> (the gradient of
                   in, src dtype).
  mp_sgd[_mom][_clip].params  weight (float16), grad<k> (float16, k = 0, 1, 2),
                   weight32 and mom (float32) before the first step, and after each step
                   k: out<k> (float16), weight32_<k>, mom_<k>.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "dtype")
DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64"]


def half_tables():
    rng = np.random.RandomState(1)
    halves = np.concatenate([np.arange(0, 0x7C00, 251, dtype=np.uint16),
                             np.array([0, 1, 2, 0x3FF, 0x400, 0x401, 0x7BFE, 0x7BFF], np.uint16)])
    lo = halves.view(np.float16).astype(np.float32)
    hi = (halves + 1).view(np.float16).astype(np.float32)  # 0x7BFF + 1 is inf
    mid = np.where(np.isinf(hi), np.float32(65520.0), (lo.astype(np.float64) + hi) / 2).astype(
        np.float32)
    f32 = [mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf)), lo]
    f = np.concatenate(f32)
    f = np.concatenate([f, -f])
    special = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                        0x7FBFE000, 0xFF802001, 0x7F802000, 0x33000000, 0x33000001, 0x32FFFFFF,
                        0x387FE000, 0x387FF000, 0x387FF001, 0x477FF000, 0x477FEFFF, 0x47800000,
                        0x00000001, 0x3F800000], np.uint32).view(np.float32)
    rand = rng.randint(0, 2**32, size=512, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f = np.concatenate([f, special, rand]).astype(np.float32)
    h = f.astype(np.float16)
    got = mx.nd.Cast(mx.nd.array(f, dtype="float32"), dtype="float16").asnumpy()
    assert np.array_equal(got.view(np.uint16), h.view(np.uint16)), "MXNet and numpy differ"
    hb = np.arange(0, 65536, 61, dtype=np.uint32).astype(np.uint16).view(np.float16)
    hf = hb.astype(np.float32)
    got = mx.nd.Cast(mx.nd.array(hb, dtype="float16"), dtype="float32").asnumpy()
    assert np.array_equal(got.view(np.uint32), hf.view(np.uint32)), "MXNet and numpy differ"
    mx.nd.save(os.path.join(OUT, "half.params"),
               {"f": mx.nd.array(f, dtype="float32"), "h": mx.nd.array(h, dtype="float16"),
                "hb": mx.nd.array(hb, dtype="float16"), "hf": mx.nd.array(hf, dtype="float32")})
    print("half: %d floats, %d halves" % (f.size, hb.size))


FLOATS = [300.7, -1.5, -300.2, 1e10, -1e10, np.nan, np.inf, -np.inf, 2.5, -2.5, 127.9, 128.0,
          255.9, 256.0, -129.0, 3e9, 65504.0, 65520.0, 1e-8, 0.3, -0.7, 1e5, -0.0, 7.0]


def source(src, rng):
    if src == "float64":
        return np.array(FLOATS[:-4] + [1e300, -1e300, 2**40 + 0.5, 1e-300], np.float64)
    if src in ("float32", "float16"):
        return np.array(FLOATS, np.float64).astype(src)
    info = np.iinfo(src)
    ext = [info.min, info.max, 0, -1 if info.min < 0 else 1]
    if src == "int64":
        ext += [2**40 + 1, -(2**40) - 1, 2**62 + 2**38 + 1, 2**53 + 1]
    vals = rng.randint(max(info.min, -1000), min(info.max, 1000) + 1, size=24 - len(ext))
    return np.array(ext + list(vals), np.int64).astype(src)


def head(dst, n, rng):
    if dst.startswith("float"):
        return rng.uniform(-4, 4, size=n).astype(dst)
    return rng.randint(0, 100, size=n).astype(dst)


def cast_cases():
    for src in DTYPES:
        rng = np.random.RandomState(DTYPES.index(src) + 10)
        x = source(src, rng)
        d = {"in": mx.nd.array(x, dtype=src)}
        for dst in DTYPES:
            a = mx.nd.array(x, dtype=src)
            a.attach_grad()
            with mx.autograd.record():
                y = mx.nd.Cast(a, dtype=dst)
            og = mx.nd.array(head(dst, x.size, rng), dtype=dst)
            y.backward(og)
            assert y.dtype == np.dtype(dst) and a.grad.dtype == np.dtype(src)
            d["out_" + dst], d["og_" + dst], d["grad_" + dst] = y, og, a.grad
        mx.nd.save(os.path.join(OUT, "cast_%s.params" % src), d)
        print("cast_%s: %s" % (src, x))


def mp_sgd_case(name, mom, params):
    rng = np.random.RandomState(len(name))
    n = 37
    w32 = rng.uniform(-2, 2, size=n).astype(np.float32)
    w = mx.nd.array(w32.astype(np.float16), dtype="float16")
    w32 = mx.nd.array(w32, dtype="float32")
    m = mx.nd.array(rng.uniform(-0.5, 0.5, size=n), dtype="float32")
    d = {"weight": w.copy(), "weight32": w32.copy(), "mom": m.copy()}
    for k in range(3):
        g = mx.nd.array(rng.uniform(-3, 3, size=n), dtype="float16")
        d["grad%d" % k] = g
        if mom:
            mx.nd.mp_sgd_mom_update(w, g, m, w32, out=w, **params)
        else:
            mx.nd.mp_sgd_update(w, g, w32, out=w, **params)
        d["out%d" % k], d["weight32_%d" % k], d["mom_%d" % k] = w.copy(), w32.copy(), m.copy()
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print(name, params)


def main():
    os.makedirs(OUT, exist_ok=True)
    half_tables()
    cast_cases()
    mp_sgd_case("mp_sgd", False, dict(lr=0.1, wd=0.01, rescale_grad=0.5))
    mp_sgd_case("mp_sgd_clip", False, dict(lr=0.05, wd=0.0, rescale_grad=1.5, clip_gradient=1.0))
    mp_sgd_case("mp_sgd_mom", True, dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5))
    mp_sgd_case("mp_sgd_mom_clip", True,
                dict(lr=0.05, momentum=0.5, wd=0.02, rescale_grad=2.0, clip_gradient=0.8))


if __name__ == "__main__":
    main()
