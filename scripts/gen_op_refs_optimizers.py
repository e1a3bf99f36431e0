#!/usr/bin/env python3
"""Reference data for tests/check_op_optimizers.c: the update operators (sgd_update,
sgd_mom_update, adam_update, nag_mom_update, rmsprop_update, rmspropalex_update,
ftrl_update, signsgd_update, signum_update, _adamw_update, lamb_update_phase1,
lamb_update_phase2) computed by MXNet 1.9.1 (the oracle), three successive steps per case.

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_optimizers.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/optimizers/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays:
    in0              the weight before the first step
    auxJ             state J before the first step (mom; mean, var; n, g, delta; z, n)
    in1_<k>          the gradient of step k (k = 0, 1, 2) (lamb_update_phase2: g)
    in2_<k>, in3_<k> further inputs of step k: _adamw_update's rescale_grad (1), and
                     lamb_update_phase2's r1 and r2 (1) (the norms of the weight and of g)
    out0_<k>         the output of step k: the weight after it (lamb_update_phase1: g)
    auxJ_<k>         state J after step k
Every step is MXNet's in-place update, e.g. nd.sgd_mom_update(w, g, mom, out=w, ...), so
the weight and the states carry over from one step to the next; lamb_update_phase1 writes
g and leaves the weight as it is. MXNet's inputs are (weight, grad, states..., extra
inputs); mxc takes the arguments first, then the states (weight, grad, extra..., states).
The parameters of each case are repeated in the C test's case table.
"""
import os

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "optimizers")
STEPS = 3

# name, operator, number of states, weight shape, parameters[, extra inputs per step]
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
    ("nag_plain", "nag_mom_update", 1, (3, 5), {"lr": 0.1, "momentum": 0.9}),
    ("nag_wd_clip", "nag_mom_update", 1, (4, 4),
     {"lr": 0.05, "momentum": 0.8, "wd": 0.3, "rescale_grad": 1.5, "clip_gradient": 0.4}),
    ("rmsprop_plain", "rmsprop_update", 1, (3, 5), {"lr": 0.01}),
    ("rmsprop_all", "rmsprop_update", 1, (4, 3),
     {"lr": 0.02, "gamma1": 0.9, "epsilon": 1e-6, "wd": 0.1, "rescale_grad": 2.0,
      "clip_gradient": 0.5, "clip_weights": 0.8}),
    ("rmspropalex_plain", "rmspropalex_update", 3, (3, 5), {"lr": 0.01}),
    ("rmspropalex_all", "rmspropalex_update", 3, (2, 6),
     {"lr": 0.02, "gamma1": 0.8, "gamma2": 0.7, "epsilon": 1e-6, "wd": 0.1,
      "rescale_grad": 0.5, "clip_gradient": 0.3, "clip_weights": 0.9}),
    ("ftrl_plain", "ftrl_update", 2, (3, 5), {"lr": 0.1}),
    ("ftrl_all", "ftrl_update", 2, (4, 3),
     {"lr": 0.05, "lamda1": 0.02, "beta": 0.5, "wd": 0.1, "rescale_grad": 2.0,
      "clip_gradient": 1.0}),
    ("signsgd_plain", "signsgd_update", 0, (3, 5), {"lr": 0.1}),
    ("signsgd_wd", "signsgd_update", 0, (2, 7),
     {"lr": 0.05, "wd": 0.2, "rescale_grad": 3.0, "clip_gradient": 0.1}),
    ("signum_plain", "signum_update", 1, (3, 5), {"lr": 0.1, "momentum": 0.9}),
    ("signum_all", "signum_update", 1, (4, 4),
     {"lr": 0.05, "momentum": 0.8, "wd": 0.1, "rescale_grad": 2.0, "clip_gradient": 0.5,
      "wd_lh": 0.01}),
    ("adamw_plain", "_adamw_update", 2, (3, 5), {"lr": 0.01, "eta": 1.0}, [[1.0] * 3]),
    ("adamw_all", "_adamw_update", 2, (5, 2),
     {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "wd": 0.1, "eta": 0.5,
      "clip_gradient": 0.3}, [[0.5, 2.0, 0.25]]),
    # a rescale_grad that is not finite, or 0, skips the step: nothing changes
    ("adamw_skip", "_adamw_update", 2, (2, 3), {"lr": 0.05, "wd": 0.1, "eta": 1.0},
     [[0.5, float("inf"), 0.0]]),
    ("lamb1_plain", "lamb_update_phase1", 2, (3, 5), {"t": 1, "wd": 0.0}),
    ("lamb1_all", "lamb_update_phase1", 2, (4, 3),
     {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-5, "t": 3, "wd": 0.1,
      "rescale_grad": 2.0, "clip_gradient": 0.5}),
    ("lamb1_nobias", "lamb_update_phase1", 2, (2, 5),
     {"t": 2, "bias_correction": False, "wd": 0.05}),
    ("lamb2_plain", "lamb_update_phase2", 0, (3, 5), {"lr": 0.1}, "norms"),
    ("lamb2_bounds", "lamb_update_phase2", 0, (4, 3),
     {"lr": 0.05, "lower_bound": 2.5, "upper_bound": 2.6}, "norms"),
    # r1 or r2 zero: the trust ratio is left out (w - lr * g)
    ("lamb2_zero", "lamb_update_phase2", 0, (2, 3), {"lr": 0.1},
     [[0.0, 1.5, 2.0], [3.0, 0.0, 0.0]]),
]

# states that must stay >= 0 (squares: var, n) or keep n >= g^2 (rmspropalex)
STATE_RANGES = {
    "adam_update": [(-0.1, 0.1), (0.0, 0.05)],
    "_adamw_update": [(-0.1, 0.1), (0.0, 0.05)],
    "lamb_update_phase1": [(-0.1, 0.1), (0.0, 0.05)],
    "rmsprop_update": [(0.0, 0.05)],
    "rmspropalex_update": [(0.05, 0.1), (-0.1, 0.1), (-0.1, 0.1)],
    "ftrl_update": [(-0.1, 0.1), (0.0, 0.05)],
}


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def op_fn(op):
    # MXNet keeps its underscore operators (_adamw_update) in mx.nd._internal
    return getattr(mx.nd, op, None) or getattr(mx.nd._internal, op)


def main():
    os.makedirs(OUT, exist_ok=True)
    for idx, (name, op, nstates, shape, params, *extra) in enumerate(CASES):
        rng = np.random.RandomState(1000 + idx)
        w = mx.nd.array(rand(rng, shape))
        ranges = STATE_RANGES.get(op, [(-0.1, 0.1)] * 3)
        states = [mx.nd.array(rand(rng, shape, *ranges[j])) for j in range(nstates)]
        d = {"in0": w.copy()}
        for j, s in enumerate(states):
            d["aux%d" % j] = s.copy()
        for k in range(STEPS):
            g = mx.nd.array(rand(rng, shape, -1.5, 1.5))
            g0 = g.copy()  # _adamw_update also scales its grad array in place
            if not extra:
                more = []
            elif extra[0] == "norms":
                more = [w.norm().reshape((1,)), g.norm().reshape((1,))]
            else:
                more = [mx.nd.array([e[k]]) for e in extra[0]]
            if op == "lamb_update_phase1":
                out = op_fn(op)(w, g, *states, **params)
            else:
                out = w
                op_fn(op)(w, g, *states, *more, out=w, **params)
            d["in1_%d" % k] = g0
            for j, m in enumerate(more):
                d["in%d_%d" % (2 + j, k)] = m
            d["out0_%d" % k] = out.copy()
            for j, s in enumerate(states):
                d["aux%d_%d" % (j, k)] = s.copy()
        mx.nd.save(os.path.join(OUT, name + ".params"), d)
        print("%-16s %s %s %s" % (name, op, shape, params))


if __name__ == "__main__":
    main()
