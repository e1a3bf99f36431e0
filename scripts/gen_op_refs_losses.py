#!/usr/bin/env python3
"""Reference data for tests/check_op_losses.c: softmax, log_softmax, SoftmaxOutput and
the regression outputs (LinearRegressionOutput, LogisticRegressionOutput,
MAERegressionOutput) computed by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_op_refs_losses.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24'). Writes tests/data/ops/losses/<case>.params, one per case, each an
mx.nd.save dict of float32 arrays: in0, in1, ... (the operator's inputs), out0 (the
forward output) and grad0 (the gradient of input 0).

softmax / log_softmax are ordinary operators: og0 holds a random head gradient and grad0
the data gradient for it (autograd). The loss operators ignore head gradients: they are
bound with simple_bind, run forward(is_train=True) and backward() with no head gradient,
as a training loop does, and grad0 is the executor's data gradient. The parameters of
each case are repeated in the C test's case tables. oneDNN is switched off
(MXNET_MKLDNN_ENABLED=0) so the native kernels, the reference semantics, run.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "0"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "losses")


def rand(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def labels(rng, shape, classes):
    return rng.randint(0, classes, size=shape).astype(np.float32)


def write(name, d):
    mx.nd.save(os.path.join(OUT, name + ".params"),
               {k: mx.nd.array(v, dtype="float32") for k, v in d.items()})


def plain(name, op, params, x):
    """An ordinary operator: forward, and backward for a random head gradient."""
    rng = np.random.RandomState(len(name) * 7919 + 13)
    a = mx.nd.array(x)
    a.attach_grad()
    with mx.autograd.record():
        out = getattr(mx.nd, op)(a, **params)
    og = rand(rng, out.shape, -1, 1)
    out.backward(mx.nd.array(og))
    write(name, {"in0": x, "out0": out.asnumpy(), "og0": og, "grad0": a.grad.asnumpy()})
    print("%-18s %s %s %s" % (name, op, params, x.shape))


def loss(name, op, params, x, y):
    """A loss operator: simple_bind, forward(is_train=True), backward() without heads."""
    sym = getattr(mx.sym, op)(mx.sym.var("data"), mx.sym.var("label"), **params)
    ex = sym.simple_bind(mx.cpu(), data=x.shape, label=y.shape, grad_req="write")
    ex.arg_dict["data"][:] = x
    ex.arg_dict["label"][:] = y
    ex.forward(is_train=True)
    ex.backward()
    write(name, {"in0": x, "in1": y, "out0": ex.outputs[0].asnumpy(),
                 "grad0": ex.grad_dict["data"].asnumpy()})
    print("%-18s %s %s %s %s" % (name, op, params, x.shape, y.shape))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(42)
    # softmax / log_softmax
    plain("sm_last", "softmax", {}, rand(rng, (3, 5)))
    plain("sm_axis1", "softmax", {"axis": 1}, rand(rng, (2, 4, 3)))
    plain("sm_temp", "softmax", {"temperature": 2.5}, rand(rng, (3, 6)))
    plain("sm_large", "softmax", {}, rand(rng, (2, 5), 500, 540))
    plain("lsm_last", "log_softmax", {}, rand(rng, (3, 5)))
    plain("lsm_axis0_temp", "log_softmax", {"axis": 0, "temperature": 0.5},
          rand(rng, (4, 3)))
    plain("lsm_large", "log_softmax", {"axis": -2}, rand(rng, (2, 3, 2), -300, 300))
    # SoftmaxOutput
    loss("so_basic", "SoftmaxOutput", {}, rand(rng, (4, 5)), labels(rng, (4,), 5))
    loss("so_scale_batch", "SoftmaxOutput", {"grad_scale": 2.0, "normalization": "batch"},
         rand(rng, (4, 5)), labels(rng, (4,), 5))
    loss("so_ignore_valid", "SoftmaxOutput",
         {"use_ignore": True, "ignore_label": 1, "normalization": "valid"},
         rand(rng, (6, 4)), np.array([1, 0, 2, 1, 3, 1], np.float32))
    loss("so_multi", "SoftmaxOutput", {"multi_output": True},
         rand(rng, (2, 3, 2, 2)), labels(rng, (2, 4), 3))
    loss("so_multi_valid", "SoftmaxOutput",
         {"multi_output": True, "use_ignore": True, "ignore_label": 0,
          "normalization": "valid"},
         rand(rng, (2, 4, 3)), labels(rng, (2, 3), 4))
    loss("so_multi_batch", "SoftmaxOutput", {"multi_output": True, "normalization": "batch"},
         rand(rng, (2, 3, 4)), labels(rng, (2, 4), 3))
    loss("so_preserve", "SoftmaxOutput", {"preserve_shape": True, "normalization": "batch"},
         rand(rng, (2, 3, 4)), labels(rng, (2, 3), 4))
    loss("so_smooth", "SoftmaxOutput", {"smooth_alpha": 0.1}, rand(rng, (3, 4)),
         labels(rng, (3,), 4))
    loss("so_prob", "SoftmaxOutput", {"grad_scale": 0.5}, rand(rng, (3, 4)),
         np.random.RandomState(5).dirichlet(np.ones(4), 3).astype(np.float32))
    loss("so_flatten", "SoftmaxOutput", {"normalization": "batch"}, rand(rng, (2, 3, 4)),
         labels(rng, (2, 3), 4))
    # regression outputs
    loss("lin_basic", "LinearRegressionOutput", {}, rand(rng, (4, 3)), rand(rng, (4, 3)))
    loss("lin_col", "LinearRegressionOutput", {"grad_scale": 3.0}, rand(rng, (5, 1)),
         rand(rng, (5,)))
    loss("logi_basic", "LogisticRegressionOutput", {"grad_scale": 0.5}, rand(rng, (3, 4)),
         rand(rng, (3, 4), 0, 1))
    loss("mae_basic", "MAERegressionOutput", {"grad_scale": 2.0}, rand(rng, (4, 3)),
         rand(rng, (4, 3)))
    loss("mae_3d", "MAERegressionOutput", {}, rand(rng, (2, 3, 2)), rand(rng, (2, 6)))


if __name__ == "__main__":
    main()
