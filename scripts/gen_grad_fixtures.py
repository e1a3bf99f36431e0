#!/usr/bin/env python3
"""scripts/gen_grad_fixtures.py — gradients of a gating network made by the real MXNet.

    /tmp/V/bin/python scripts/gen_grad_fixtures.py        # MXNet 1.9.1, numpy<1.24

The network of tests/check_executor.c's test_gating_gradients_equal_mxnet:
    data (4, 6) -> fa = FullyConnected(5), fb = FullyConnected(5)
                -> op = fa * sigmoid(fb) -> out = FullyConnected(3)
bound with gradients, run forward in training mode and backward with a fixed head
gradient. Writes tests/data/executor/gating.params, an NDArray list of
  arg:<name>   every argument (data and the weights, uniform in [-1, 1), seed fixed)
  head         the head gradient (4, 3)
  output       MXNet's forward output
  grad:<name>  MXNet's gradient of every argument
mxc's gradients used to differ from these by up to 0.3 (the _mul backward read its output
gradient after writing over it); finite differences in the same test file are the other
oracle.
"""
import os

import mxnet as mx
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "executor")


def gating():
    data = mx.sym.Variable("data")
    fa = mx.sym.FullyConnected(data, num_hidden=5, name="fa")
    fb = mx.sym.FullyConnected(data, num_hidden=5, name="fb")
    y = mx.sym.elemwise_mul(fa, mx.sym.sigmoid(fb), name="op")
    return mx.sym.FullyConnected(y, num_hidden=3, name="out")


def main():
    sym = gating()
    rng = np.random.RandomState(7)
    arg_shapes, _, _ = sym.infer_shape(data=(4, 6))
    names = sym.list_arguments()
    args = {n: mx.nd.array(rng.uniform(-1, 1, s).astype(np.float32))
            for n, s in zip(names, arg_shapes)}
    grads = {n: mx.nd.zeros(s) for n, s in zip(names, arg_shapes)}
    head = mx.nd.array(rng.uniform(-1, 1, (4, 3)).astype(np.float32))
    exe = sym.bind(mx.cpu(), args=args, args_grad=grads, grad_req="write")
    exe.forward(is_train=True)
    exe.backward(out_grads=[head])
    saved = {"arg:" + n: args[n] for n in names}
    saved.update({"grad:" + n: grads[n] for n in names})
    saved["head"] = head
    saved["output"] = exe.outputs[0]
    os.makedirs(OUT, exist_ok=True)
    mx.nd.save(os.path.join(OUT, "gating.params"), saved)
    print("wrote", os.path.join(OUT, "gating.params"), sorted(saved))


if __name__ == "__main__":
    main()
