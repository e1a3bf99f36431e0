#!/usr/bin/env python3
"""scripts/gen_symbol_fixtures.py — symbol fixtures made by the real MXNet (run by hand).

    /tmp/mxvenv/bin/python scripts/gen_symbol_fixtures.py        # MXNet 1.9.1, numpy<1.24

Writes under tests/data/symbol/, for each net (mlp, lenet, resblock, concat):
  <name>-symbol.json   mx.sym.save of the net
  <name>-0000.params   arg:<name> / aux:<name> arrays, small random weights (seed fixed)
  <name>-io.params     input:<arg> (the fixed input batch, 2 samples, and the label) and
                       output:<name> (MXNet's forward outputs in inference mode)
  <name>-meta.txt      what MXNet says about the symbol, one fact a line:
                         arguments <name> ...          (list_arguments)
                         outputs <name> ...            (list_outputs)
                         aux <name> ...                (list_auxiliary_states)
                         given <name> <d0,d1,...>      (the shapes passed to infer_shape)
                         arg_shape <name> <dims>       (infer_shape's results, in order)
                         out_shape <name> <dims>
                         aux_shape <name> <dims>
Two legacy files, legacy08_mlp-symbol.json and legacy08_bn-symbol.json, are written BY HAND
below in the style MXNet 0.8 produced (per-node "param" holding every parameter, a variable
with "attr", two-element inputs, "backward_source_id", no node_row_ptr, no mxnet_version,
and, for the BatchNorm net, no moving_mean / moving_var nodes). MXNet 1.9.1 loads them
(upgrading them) and its listings and inferred shapes go to <name>-meta.txt as above.

Checked once by hand (mxc's saving, MXNet loading): `MXC_SYMBOL_DUMP=/tmp/d
build/bin/check_symbol` saves every fixture mxc loaded as /tmp/d/<name>-mxc.json, and
`--check-mxc /tmp/d` below loads each in MXNet 1.9.1 and compares list_arguments /
list_outputs / list_auxiliary_states / infer_shape with <name>-meta.txt: all six matched,
with mxc's own operators. Also, a
net built through the C API (data -> FullyConnected -> BatchNorm -> relu, automatic names)
saved JSON equal, node for node, to MXNet's tojson() of the same net.
"""
import os
import sys

import mxnet as mx
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "symbol")


def mlp():
    data = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(data, num_hidden=32, name="fc1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.FullyConnected(x, num_hidden=16, name="fc2")
    x = mx.sym.Activation(x, act_type="relu", name="relu2")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(x, name="softmax"), {"data": (2, 784)}


def lenet():
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, kernel=(5, 5), num_filter=8, name="conv1")
    x = mx.sym.Activation(x, act_type="tanh", name="tanh1")
    x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    x = mx.sym.Convolution(x, kernel=(5, 5), num_filter=16, name="conv2")
    x = mx.sym.Activation(x, act_type="tanh", name="tanh2")
    x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
    x = mx.sym.Flatten(x, name="flatten")
    x = mx.sym.FullyConnected(x, num_hidden=64, name="fc1")
    x = mx.sym.Activation(x, act_type="tanh", name="tanh3")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(x, name="softmax"), {"data": (2, 1, 28, 28)}


def resblock():
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True,
                           name="conv1")
    x = mx.sym.BatchNorm(x, fix_gamma=False, eps=2e-5, name="bn1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True,
                           name="conv2")
    x = mx.sym.BatchNorm(x, fix_gamma=False, eps=2e-5, name="bn2")
    x = x + data
    x = mx.sym.Activation(x, act_type="relu", name="relu2")
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool")
    x = mx.sym.Flatten(x, name="flatten")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc")
    return mx.sym.SoftmaxOutput(x, name="softmax"), {"data": (2, 4, 8, 8)}


def concat():
    data = mx.sym.Variable("data")
    a = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fca"),
                          act_type="relu", name="relua")
    b = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=6, name="fcb"),
                          act_type="sigmoid", name="sigb")
    x = mx.sym.Concat(a, b, dim=1, name="concat")
    x = mx.sym.Dropout(x, p=0.3, name="drop")
    x = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    return mx.sym.SoftmaxOutput(x, name="softmax"), {"data": (3, 16)}


LEGACY_MLP = """{
  "nodes": [
    {"op": "null", "param": {}, "name": "data", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "fc1_weight", "inputs": [],
     "backward_source_id": -1, "attr": {"__lr_mult__": "0.5"}},
    {"op": "null", "param": {}, "name": "fc1_bias", "inputs": [], "backward_source_id": -1},
    {"op": "FullyConnected", "param": {"no_bias": "False", "num_hidden": "16"},
     "name": "fc1", "inputs": [[0, 0], [1, 0], [2, 0]], "backward_source_id": -1},
    {"op": "Activation", "param": {"act_type": "relu"}, "name": "relu1",
     "inputs": [[3, 0]], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "fc2_weight", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "fc2_bias", "inputs": [], "backward_source_id": -1},
    {"op": "FullyConnected", "param": {"no_bias": "False", "num_hidden": "10"},
     "name": "fc2", "inputs": [[4, 0], [5, 0], [6, 0]], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "softmax_label", "inputs": [],
     "backward_source_id": -1},
    {"op": "SoftmaxOutput",
     "param": {"grad_scale": "1", "ignore_label": "-1", "multi_output": "False",
               "use_ignore": "False"},
     "name": "softmax", "inputs": [[7, 0], [8, 0]], "backward_source_id": -1}
  ],
  "arg_nodes": [0, 1, 2, 5, 6, 8],
  "heads": [[9, 0]]
}
"""

LEGACY_BN = """{
  "nodes": [
    {"op": "null", "param": {}, "name": "data", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "conv1_weight", "inputs": [],
     "backward_source_id": -1},
    {"op": "Convolution",
     "param": {"kernel": "(3, 3)", "no_bias": "True", "num_filter": "4", "pad": "(1, 1)",
               "stride": "(1, 1)", "workspace": "512"},
     "name": "conv1", "inputs": [[0, 0], [1, 0]], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "bn1_gamma", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "bn1_beta", "inputs": [], "backward_source_id": -1},
    {"op": "BatchNorm",
     "param": {"eps": "0.001", "fix_gamma": "True", "momentum": "0.9",
               "use_global_stats": "False"},
     "name": "bn1", "inputs": [[2, 0], [3, 0], [4, 0]], "backward_source_id": -1},
    {"op": "Activation", "param": {"act_type": "relu"}, "name": "relu1",
     "inputs": [[5, 0]], "backward_source_id": -1}
  ],
  "arg_nodes": [0, 1, 3, 4],
  "heads": [[6, 0]]
}
"""


def dims(s):
    return ",".join(str(d) for d in s)


def meta(sym, given):
    lines = ["arguments " + " ".join(sym.list_arguments()),
             "outputs " + " ".join(sym.list_outputs()),
             "aux " + " ".join(sym.list_auxiliary_states())]
    for k, v in given.items():
        lines.append("given %s %s" % (k, dims(v)))
    a, o, x = sym.infer_shape(**given)
    for n, s in zip(sym.list_arguments(), a):
        lines.append("arg_shape %s %s" % (n, dims(s)))
    for n, s in zip(sym.list_outputs(), o):
        lines.append("out_shape %s %s" % (n, dims(s)))
    for n, s in zip(sym.list_auxiliary_states(), x):
        lines.append("aux_shape %s %s" % (n, dims(s)))
    return "\n".join(lines) + "\n", (a, o, x)


def write_net(name, sym, given, rng):
    sym.save(os.path.join(OUT, name + "-symbol.json"))
    text, (ashapes, _, xshapes) = meta(sym, given)
    with open(os.path.join(OUT, name + "-meta.txt"), "w") as f:
        f.write(text)
    args, aux, io = {}, {}, {}
    for n, s in zip(sym.list_arguments(), ashapes):
        if n in given:
            v = rng.uniform(-1, 1, size=s)
        elif n.endswith("_label"):
            v = rng.randint(0, 4, size=s)
        else:
            v = rng.uniform(-0.3, 0.3, size=s)
            if n.endswith("_gamma"):
                v = 1 + v
        arr = mx.nd.array(v.astype(np.float32))
        if n in given or n.endswith("_label"):
            io["input:" + n] = arr
        else:
            args[n] = arr
    for n, s in zip(sym.list_auxiliary_states(), xshapes):
        v = rng.uniform(0.5, 1.5, size=s) if n.endswith("_var") else rng.uniform(-.2, .2, s)
        aux[n] = mx.nd.array(v.astype(np.float32))
    save = {"arg:" + k: v for k, v in args.items()}
    save.update({"aux:" + k: v for k, v in aux.items()})
    mx.nd.save(os.path.join(OUT, name + "-0000.params"), save)
    bind_args = dict(args)
    bind_args.update({k[len("input:"):]: v for k, v in io.items()})
    ex = sym.bind(mx.cpu(), bind_args, aux_states=aux, grad_req="null")
    outs = ex.forward(is_train=False)
    for n, o in zip(sym.list_outputs(), outs):
        io["output:" + n] = o.copy()
    mx.nd.save(os.path.join(OUT, name + "-io.params"), io)


def check_mxc(folder):
    """MXNet loads mxc's saved JSON with the listings and shapes recorded in <name>-meta.txt."""
    for f in sorted(os.listdir(folder)):
        if not f.endswith("-mxc.json"):
            continue
        name = f[:-len("-mxc.json")]
        with open(os.path.join(OUT, name + "-meta.txt")) as m:
            want = m.read()
        given = {}
        for line in want.splitlines():
            if line.startswith("given "):
                _, k, v = line.split(" ")
                given[k] = tuple(int(d) for d in v.split(","))
        back = mx.sym.load(os.path.join(folder, f))
        got = meta(back, given)[0]
        assert got == want, "%s:\n%s\n!=\n%s" % (name, got, want)
        print("ok", name)


NETS = [("mlp", mlp), ("lenet", lenet), ("resblock", resblock), ("concat", concat)]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check-mxc":
        check_mxc(sys.argv[2])
        return
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(20240605)
    mx.random.seed(1)
    for name, fn in NETS:
        sym, given = fn()
        write_net(name, sym, given, rng)
    for name, text, given in [("legacy08_mlp", LEGACY_MLP, {"data": (2, 20)}),
                              ("legacy08_bn", LEGACY_BN, {"data": (2, 3, 6, 6)})]:
        path = os.path.join(OUT, name + "-symbol.json")
        with open(path, "w") as f:
            f.write(text)
        sym = mx.sym.load(path)  # MXNet upgrades the 0.8 file as it loads it
        with open(os.path.join(OUT, name + "-meta.txt"), "w") as f:
            f.write(meta(sym, given)[0])
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %s (%d bytes)" % (OUT, total))


if __name__ == "__main__":
    main()
