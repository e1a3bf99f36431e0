#!/usr/bin/env python3
"""Reference data for tests/check_op_rnn.c: the fused RNN operator (modes rnn_relu, rnn_tanh,
lstm, gru; 1 and 2 layers; uni- and bidirectional; with and without state outputs) computed
by MXNet 1.9.1 on the CPU (the oracle), forward in training mode (p = 0) and every gradient.

Run once, from the repository root, and commit the output:

    /tmp/V/bin/python scripts/gen_op_refs_rnn.py

Unlike the other generators this one keeps MXNet's oneDNN (MKLDNN) backend on: with it off,
the pip build of MXNet 1.9.1 runs RNN through a storage fallback that is broken: it refuses
state_outputs and lstm ("Check failed: out_data.size() == num_outputs (2 vs. 1)", "in_data.size()
== num_inputs (4 vs. 3)") and returns NaN for the rest. tests/check_op_rnn.c checks every
gradient against finite differences as well, independently of this oracle.

Writes tests/data/ops/rnn/<case>.params, one per case, each an mx.nd.save dict of float32
arrays: in0, in1, ... (data (T, N, I), the flat parameter vector, state and, for lstm,
state_cell), out0, out1, ... (the visible outputs: out, then hy and cy with state_outputs),
og0, og1, ... (head gradients, one per visible output) and grad0, grad1, ... (the input
gradients for them). The parameters of each case are repeated in the C test's case table.
"""
import os

os.environ["MXNET_MKLDNN_ENABLED"] = "1"
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np

OUT = os.path.join("tests", "data", "ops", "rnn")
T, N, I, H = 5, 3, 4, 6
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def param_size(mode, layers, dirs):
    """MXNet's flat parameter count: per layer and direction, i2h and h2h weights and biases."""
    g, size = GATES[mode], 0
    for layer in range(layers):
        inp = I if layer == 0 else dirs * H
        size += dirs * g * H * (inp + H + 2)
    return size


def save(name, mode, layers, bidirectional, state_outputs, seed):
    rng = np.random.RandomState(seed)
    dirs = 2 if bidirectional else 1
    inputs = [rand(rng, (T, N, I)), rand(rng, (param_size(mode, layers, dirs),), -0.5, 0.5),
              rand(rng, (layers * dirs, N, H))]
    if mode == "lstm":
        inputs.append(rand(rng, (layers * dirs, N, H)))
    # the symbolic executor: MXNet 1.9.1's imperative backward of RNN with state_outputs
    # fails its own output count check
    names = ["data", "parameters", "state", "state_cell"][:len(inputs)]
    params = dict(state_size=H, num_layers=layers, bidirectional=bidirectional, mode=mode,
                  state_outputs=state_outputs)
    sym = mx.sym.RNN(*[mx.sym.Variable(n) for n in names], **params)
    exe = sym.simple_bind(mx.cpu(), grad_req="write", **{n: x.shape for n, x in zip(names, inputs)})
    for n, x in zip(names, inputs):
        exe.arg_dict[n][:] = x
    outs = exe.forward(is_train=True)
    ogs = [mx.nd.array(rand(rng, o.shape)) for o in outs]
    exe.backward(ogs)
    arrays = [exe.arg_dict[n] for n in names]
    grads = [exe.grad_dict[n] for n in names]
    d = {}
    for i, (a, g) in enumerate(zip(arrays, grads)):
        d["in%d" % i] = a
        d["grad%d" % i] = g
    for k, (o, g) in enumerate(zip(outs, ogs)):
        d["out%d" % k] = o
        d["og%d" % k] = g
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    print("%-22s %s -> %s" % (name, params, [o.shape for o in outs]))


def export_lm():
    """A Gluon language model (Embedding -> 2-layer LSTM -> Dense) with its begin states as
    inputs, exported as Gluon writes it (lm-symbol.json, lm-0000.params: the fused RNN fed by
    Reshape and _rnn_param_concat of the per-layer weights), with its output and the weight
    gradients for a head gradient (lm_io.params: data, h0, c0, out, og, grad:<weight>)."""
    from mxnet.gluon import nn, rnn

    class LM(mx.gluon.HybridBlock):
        def __init__(self, **kw):
            super().__init__(**kw)
            with self.name_scope():
                self.emb = nn.Embedding(10, 4)
                self.lstm = rnn.LSTM(H, num_layers=2, input_size=4)
                self.fc = nn.Dense(10, flatten=False, in_units=H)

        def hybrid_forward(self, F, x, h0, c0):
            out, _ = self.lstm(self.emb(x), [h0, c0])
            return self.fc(out)

    mx.random.seed(7)
    net = LM(prefix="lm_")
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    rng = np.random.RandomState(8)
    x = mx.nd.array(rng.randint(0, 10, size=(T, N)).astype(np.float32))
    h0, c0 = (mx.nd.array(rand(rng, (2, N, H))) for _ in range(2))
    with mx.autograd.record():
        out = net(x, h0, c0)
    og = mx.nd.array(rand(rng, out.shape))
    out.backward(og)
    net.export(os.path.join(OUT, "lm"))
    d = {"data": x, "h0": h0, "c0": c0, "out": out, "og": og}
    for name, prm in net.collect_params().items():
        d["grad:" + name] = prm.grad()
    mx.nd.save(os.path.join(OUT, "lm_io.params"), d)
    print("lm (Gluon export)      -> %s" % (out.shape,))


def main():
    os.makedirs(OUT, exist_ok=True)
    seed = 50
    # per mode, four cases that take every value of layers, direction and state outputs
    for mode in ("rnn_relu", "rnn_tanh", "lstm", "gru"):
        for layers, bi, so in ((1, False, False), (1, True, True), (2, False, True),
                               (2, True, False)):
            name = "%s_l%d_%s%s" % (mode, layers, "bi" if bi else "uni", "_states" if so else "")
            save(name, mode, layers, bi, so, seed)
            seed += 1
    export_lm()


if __name__ == "__main__":
    main()
