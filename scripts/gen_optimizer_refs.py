#!/usr/bin/env python3
"""Reference data for tests/check_optimizer.c: MXNet 1.9.1's Python optimizers (the
oracle) over several steps, and its learning-rate schedulers.

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/mxvenv/bin/python scripts/gen_optimizer_refs.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes, under tests/data/optimizers/:

  <case>.params   one per optimizer case (an mx.nd.save dict of float32 arrays): two
                  parameters, index 0 of shape (3, 4) and index 1 of shape (5,), index 1
                  with lr_mult 0.5 and wd_mult 2 (set_lr_mult / set_wd_mult by index);
                  "w<p>" the weight before the first step, "g<p>_<k>" the gradient of step k
                  (k = 0 .. STEPS-1) as given (AdaDelta scales its grad array in place),
                  "w<p>_<k>" the weight after step k. Each step updates index 0, then 1.
  schedules.params the learning rate of each scheduler case at update counts 1 .. 40
                  (float32, "<case>"), as MXNet's optimizer asks its scheduler.

MXNet 1.9.1 has no AdamW optimizer class, only the _adamw_update operator: the AdamW case
drives it the way GluonNLP's BERTAdam does (bias correction folded into eta, lr = 1). The
parameters of each case are repeated in the C test's case table.
"""
import math
import os

import mxnet as mx
import numpy as np
from mxnet import lr_scheduler as ls
from mxnet.optimizer import Optimizer

OUT = os.path.join("tests", "data", "optimizers")
STEPS = 5
SHAPES = [(3, 4), (5,)]
COMMON = {"wd": 0.01, "rescale_grad": 0.5, "clip_gradient": 1.0}


class AdamW(Optimizer):
    """GluonNLP's BERTAdam: _adamw_update with the bias-corrected rate as eta."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        return (mx.nd.zeros(weight.shape), mx.nd.zeros(weight.shape))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)
        kwargs = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        mean, var = state
        mx.nd._internal._adamw_update(weight, grad, mean, var,
                                      mx.nd.array([self.rescale_grad]), out=weight, lr=1,
                                      wd=wd, eta=lr, **kwargs)


# name, optimizer class, its arguments
CASES = [
    ("nag", mx.optimizer.NAG, dict(learning_rate=0.1, momentum=0.9, **COMMON)),
    ("nag_nomomentum", mx.optimizer.NAG, dict(learning_rate=0.1, wd=0.01)),
    ("rmsprop", mx.optimizer.RMSProp, dict(learning_rate=0.01, gamma1=0.8, **COMMON)),
    ("rmsprop_centered", mx.optimizer.RMSProp,
     dict(learning_rate=0.01, gamma1=0.8, gamma2=0.7, centered=True, clip_weights=0.9,
          **COMMON)),
    ("adagrad", mx.optimizer.AdaGrad, dict(learning_rate=0.1, **COMMON)),
    ("adagrad_noclip", mx.optimizer.AdaGrad, dict(learning_rate=0.1, eps=1e-5, wd=0.02)),
    ("adadelta", mx.optimizer.AdaDelta, dict(rho=0.9, epsilon=1e-5, **COMMON)),
    ("adadelta_noclip", mx.optimizer.AdaDelta, dict(rho=0.8, epsilon=1e-4, wd=0.0)),
    ("ftrl", mx.optimizer.Ftrl, dict(learning_rate=0.1, lamda1=0.01, beta=1, **COMMON)),
    ("signum", mx.optimizer.Signum,
     dict(learning_rate=0.01, momentum=0.9, wd_lh=0.01, **COMMON)),
    ("signsgd", mx.optimizer.Signum, dict(learning_rate=0.01, momentum=0.0, wd=0.01)),
    ("adamw", AdamW, dict(learning_rate=0.01, **COMMON)),
    ("lamb", mx.optimizer.LAMB,
     dict(learning_rate=0.01, lower_bound=0.5, upper_bound=2.0, **COMMON)),
    ("lamb_nobias", mx.optimizer.LAMB,
     dict(learning_rate=0.01, bias_correction=False, wd=0.01)),
]

# multi_precision=True on float16 weights: SGD through mp_sgd_(mom_)update, the others
# through the base class's float32 master copy
MP_CASES = [
    ("mp_sgd", mx.optimizer.SGD, dict(learning_rate=0.1, multi_precision=True, **COMMON)),
    ("mp_sgd_mom", mx.optimizer.SGD,
     dict(learning_rate=0.1, momentum=0.9, multi_precision=True, **COMMON)),
    ("mp_adam", mx.optimizer.Adam, dict(learning_rate=0.01, multi_precision=True, **COMMON)),
]

# name, scheduler (as MXNet's optimizer uses it: called with the update count)
SCHEDULES = [
    ("factor", lambda: ls.FactorScheduler(step=5, factor=0.5, stop_factor_lr=0.02,
                                          base_lr=1.0)),
    ("multifactor", lambda: ls.MultiFactorScheduler(step=[3, 10, 11, 25], factor=0.3,
                                                    base_lr=1.0)),
    ("cosine", lambda: ls.CosineScheduler(max_update=30, base_lr=0.5, final_lr=0.01)),
    ("cosine_warmup", lambda: ls.CosineScheduler(max_update=30, base_lr=0.5, final_lr=0.01,
                                                 warmup_steps=6, warmup_begin_lr=0.1)),
    ("cosine_warmup_constant", lambda: ls.CosineScheduler(
        max_update=30, base_lr=0.5, warmup_steps=6, warmup_begin_lr=0.1,
        warmup_mode="constant")),
    ("poly", lambda: ls.PolyScheduler(max_update=30, base_lr=0.5, pwr=2, final_lr=0.01)),
    ("poly_warmup", lambda: ls.PolyScheduler(max_update=30, base_lr=0.5, pwr=1.5,
                                             final_lr=0.05, warmup_steps=8,
                                             warmup_begin_lr=0.0)),
]
SCHEDULE_UPDATES = 40


def main():
    os.makedirs(OUT, exist_ok=True)
    for idx, (name, cls, kwargs) in enumerate(CASES):
        rng = np.random.RandomState(2000 + idx)
        opt = cls(**kwargs)
        opt.set_lr_mult({1: 0.5})
        opt.set_wd_mult({1: 2.0})
        weights = [mx.nd.array(rng.uniform(-1, 1, size=s).astype(np.float32)) for s in SHAPES]
        states = [opt.create_state(p, w) for p, w in enumerate(weights)]
        d = {"w%d" % p: w.copy() for p, w in enumerate(weights)}
        for k in range(STEPS):
            for p, w in enumerate(weights):
                g = mx.nd.array(rng.uniform(-3, 3, size=w.shape).astype(np.float32))
                d["g%d_%d" % (p, k)] = g.copy()
                opt.update(p, w, g, states[p])
                d["w%d_%d" % (p, k)] = w.copy()
        mx.nd.save(os.path.join(OUT, name + ".params"), d)
        print("%-18s %s %s" % (name, cls.__name__, kwargs))
    for idx, (name, cls, kwargs) in enumerate(MP_CASES):
        # mp_<case>.params: as above with float16 "w<p>", "g<p>_<k>", "w<p>_<k>", and
        # "m<p>" the float32 master copy after the last step
        rng = np.random.RandomState(3000 + idx)
        opt = cls(**kwargs)
        opt.set_lr_mult({1: 0.5})
        opt.set_wd_mult({1: 2.0})
        weights = [mx.nd.array(rng.uniform(-1, 1, size=s), dtype=np.float16) for s in SHAPES]
        states = [opt.create_state_multi_precision(p, w) for p, w in enumerate(weights)]
        d = {"w%d" % p: w.copy() for p, w in enumerate(weights)}
        for k in range(STEPS):
            for p, w in enumerate(weights):
                g = mx.nd.array(rng.uniform(-3, 3, size=w.shape), dtype=np.float16)
                d["g%d_%d" % (p, k)] = g.copy()
                opt.update_multi_precision(p, w, g, states[p])
                d["w%d_%d" % (p, k)] = w.copy()
        for p, st in enumerate(states):
            # SGD keeps (mom, weight32), the base class (weight32, state)
            d["m%d" % p] = (st[1] if cls is mx.optimizer.SGD else st[0]).copy()
            assert d["m%d" % p].dtype == np.float32
        mx.nd.save(os.path.join(OUT, name + ".params"), d)
        print("%-18s %s %s" % (name, cls.__name__, kwargs))
    d = {}
    for name, make in SCHEDULES:
        sched = make()
        d[name] = mx.nd.array([sched(n) for n in range(1, SCHEDULE_UPDATES + 1)],
                              dtype=np.float32)
        print("%-24s %s" % (name, d[name].asnumpy()[:12]))
    mx.nd.save(os.path.join(OUT, "schedules.params"), d)


if __name__ == "__main__":
    main()
