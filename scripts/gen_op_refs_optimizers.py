#!/usr/bin/env python3
"""Reference data for tests/check_op_optimizers.c: sgd_update, sgd_mom_update and
adam_update computed by MXNet 1.9.1 (the oracle), three successive steps per case.

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_optimizers.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/optimizers/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays:
    in0              the weight before the first step
    aux0, aux1       the optimizer states before the first step (mom; or mean, var)
    in1_<k>          the gradient of step k (k = 0, 1, 2)
    out0_<k>         the weight after step k
    aux0_<k>, aux1_<k>  the states after step k
Every step is MXNet's in-place update, e.g. nd.sgd_mom_update(w, g, mom, out=w, ...), so
the weight and the states carry over from one step to the next. The parameters of each
case are repeated in the C test's case table.
"""
import os

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "optimizers")
STEPS = 3

# name, operator, number of states, weight shape, parameters
CASES = [
    ("sgd_plain", "sgd_update", 0, (3, 5), {"lr": 0.1}),
    ("sgd_wd_rescale", "sgd_update", 0, (4, 3),
     {"lr": 0.05, "wd": 0.1, "rescale_grad": 0.5, "lazy_update": False}),
    ("sgd_clip", "sgd_update", 0, (2, 3, 4),
     {"lr": 0.1, "wd": 0.2, "rescale_grad": 2.0, "clip_gradient": 0.3}),
    ("mom_plain", "sgd_mom_update", 1, (3, 5), {"lr": 0.1, "momentum": 0.9}),
    ("mom_nomomentum", "sgd_mom_update", 1, (7,), {"lr": 0.2, "wd": 0.01}),
    ("mom_wd_clip", "sgd_mom_update", 1, (4, 4),
     {"lr": 0.05, "momentum": 0.8, "wd": 0.3, "rescale_grad": 1.5, "clip_gradient": 0.4}),
    ("adam_default", "adam_update", 2, (3, 5), {"lr": 0.01}),
    ("adam_wd_rescale", "adam_update", 2, (5, 2),
     {"lr": 0.05, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "wd": 0.1,
      "rescale_grad": 0.5}),
    ("adam_clip", "adam_update", 2, (2, 2, 3),
     {"lr": 0.02, "wd": 0.5, "rescale_grad": 2.0, "clip_gradient": 0.2}),
]


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    for idx, (name, op, nstates, shape, params) in enumerate(CASES):
        rng = np.random.RandomState(1000 + idx)
        w = mx.nd.array(rand(rng, shape))
        if nstates == 1:
            states = [mx.nd.array(rand(rng, shape, -0.1, 0.1))]
        elif nstates == 2:
            states = [mx.nd.array(rand(rng, shape, -0.1, 0.1)),
                      mx.nd.array(rand(rng, shape, 0.0, 0.05))]
        else:
            states = []
        d = {"in0": w.copy()}
        for j, s in enumerate(states):
            d["aux%d" % j] = s.copy()
        for k in range(STEPS):
            g = mx.nd.array(rand(rng, shape, -1.5, 1.5))
            getattr(mx.nd, op)(w, g, *states, out=w, **params)
            d["in1_%d" % k] = g
            d["out0_%d" % k] = w.copy()
            for j, s in enumerate(states):
                d["aux%d_%d" % (j, k)] = s.copy()
        mx.nd.save(os.path.join(OUT, name + ".params"), d)
        print("%-16s %s %s %s" % (name, op, shape, params))


if __name__ == "__main__":
    main()
