#!/usr/bin/env python3
"""Fixtures for tests/check_zoo.c: MXNet 1.9.1's Gluon model-zoo vision models, a
Transformer encoder block and an LSTM language model (Embedding, Gluon's 2-layer rnn.LSTM,
which exports the fused RNN operator, Dense), exported with seeded weights, with MXNet's
outputs.

Run once, from the repository root, and commit the output:

    MXNET_MKLDNN_ENABLED=0 /tmp/V/bin/python scripts/gen_model_zoo.py [model ...]

(/tmp/V: python3 -m venv /tmp/V && /tmp/V/bin/pip install mxnet==1.9.1 'numpy<1.24').
For each model it builds the Gluon block, initialises it, overwrites every parameter
(weights, biases, BatchNorm / LayerNorm gamma and beta, running means and variances) with
the values scripts/zoo_seeded.py computes from the parameter's name and shape (the C test
computes the same ones with tests/util/seeded.c), hybridizes it, runs one inference pass on
a seeded input called "data" and writes under tests/data/zoo/:

    <model>-symbol.json   the exported symbol (net.export's JSON, re-written compactly)
    <model>.params        MXNet's outputs: out0, out1, ... (float32), and data_head, the
                          input's first 64 values, so the C test can check that its seeded
                          input is MXNet's

The LSTM language model runs in a child process with MXNET_MKLDNN_ENABLED=1: without
MKL-DNN, MXNet 1.9.1's RNN operator fails on any LSTM (its input count check). Its input is
word ids (zoo_seeded.tokens). No weights are stored. The input sizes are the smallest each model accepts (the models
ending in global pooling take 32x32; SqueezeNet's and DenseNet's fixed 7x7 / 13x13 average
pools need 224, Inception-v3's 8x8 one 299; VGG's and AlexNet's Dense layers take their
input size from the data, so they run smaller than ImageNet's 224), to keep the C suite
fast.
"""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("MXNET_MKLDNN_ENABLED", "0")
os.environ["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn, rnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_seeded  # noqa: E402

OUT = os.path.join("tests", "data", "zoo")

# name -> input shape (batch 1: the batch only repeats the work)
VISION = {
    "resnet18_v1": (1, 3, 32, 32),
    "resnet18_v2": (1, 3, 32, 32),
    "mobilenet1.0": (1, 3, 32, 32),
    "mobilenetv2_1.0": (1, 3, 32, 32),
    "vgg11_bn": (1, 3, 32, 32),
    "alexnet": (1, 3, 63, 63),
    "squeezenet1.1": (1, 3, 209, 209),
    "densenet121": (1, 3, 224, 224),
    "inceptionv3": (1, 3, 299, 299),
}


class EncoderBlock(gluon.HybridBlock):
    """A post-norm Transformer encoder block: multi-head self-attention (batch_dot,
    softmax), Dropout, residual, LayerNorm, a 2-layer FFN with GELU, Dropout, residual,
    LayerNorm. in, out: (N, T, units)."""

    def __init__(self, units, heads, hidden, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.units, self.heads = units, heads
        with self.name_scope():
            self.qkv = nn.Dense(3 * units, flatten=False)
            self.proj = nn.Dense(units, flatten=False)
            self.drop_att = nn.Dropout(dropout)
            self.drop1 = nn.Dropout(dropout)
            self.ln1 = nn.LayerNorm()
            self.ffn1 = nn.Dense(hidden, flatten=False)
            self.gelu = nn.GELU()
            self.ffn2 = nn.Dense(units, flatten=False)
            self.drop2 = nn.Dropout(dropout)
            self.ln2 = nn.LayerNorm()

    def hybrid_forward(self, F, x):
        h, d = self.heads, self.units // self.heads
        qkv = self.qkv(x)  # (N, T, 3 * units)
        q, k, v = F.split(qkv, num_outputs=3, axis=-1)

        def heads(t):  # (N, T, units) -> (N * h, T, d)
            t = F.reshape(t, shape=(0, 0, h, d))
            t = F.transpose(t, axes=(0, 2, 1, 3))
            return F.reshape(t, shape=(-3, 0, 0))

        q, k, v = heads(q), heads(k), heads(v)
        score = F.batch_dot(q, k, transpose_b=True) / float(np.sqrt(d))
        att = self.drop_att(F.softmax(score, axis=-1))
        ctx = F.batch_dot(att, v)  # (N * h, T, d)
        ctx = F.reshape(ctx, shape=(-4, -1, h, 0, 0))
        ctx = F.reshape(F.transpose(ctx, axes=(0, 2, 1, 3)), shape=(0, 0, -1))
        x = self.ln1(x + self.drop1(self.proj(ctx)))
        return self.ln2(x + self.drop2(self.ffn2(self.gelu(self.ffn1(x)))))


class LanguageModel(gluon.HybridBlock):
    """Embedding -> 2-layer LSTM (Gluon's rnn.LSTM: the fused RNN operator) -> Dense.
    in: (N, T) word ids; out: (N, T, vocab)."""

    def __init__(self, vocab, embed, hidden, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = nn.Embedding(vocab, embed)
            self.lstm = rnn.LSTM(hidden, num_layers=2, layout="NTC", input_size=embed)
            self.out = nn.Dense(vocab, flatten=False)

    def hybrid_forward(self, F, x):
        return self.out(self.lstm(self.embed(x)))


LSTM_VOCAB = 50


def build(name):
    """(block, input shape)."""
    if name in VISION:
        return gluon.model_zoo.vision.get_model(name), VISION[name]
    if name == "transformer_encoder":
        return EncoderBlock(units=32, heads=4, hidden=64, prefix="encoder_"), (2, 6, 32)
    if name == "lstm_lm":
        return LanguageModel(LSTM_VOCAB, 16, 32, prefix="lm_"), (2, 5)
    raise SystemExit("unknown model " + name)


def run(name):
    net, shape = build(name)
    net.initialize()
    if name == "lstm_lm":  # word ids
        data = mx.nd.array(zoo_seeded.tokens("data", shape, LSTM_VOCAB))
    else:
        data = mx.nd.array(zoo_seeded.values("data", shape))
    net(data)  # completes deferred shapes
    for p in net.collect_params().values():
        p.set_data(mx.nd.array(zoo_seeded.values(p.name, p.shape)))
    net.hybridize(static_alloc=False)
    outs = net(data)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    with tempfile.TemporaryDirectory() as tmp:
        net.export(os.path.join(tmp, "m"))
        with open(os.path.join(tmp, "m-symbol.json")) as f:
            sym = json.load(f)
    with open(os.path.join(OUT, name + "-symbol.json"), "w") as f:
        json.dump(sym, f, separators=(",", ":"))
        f.write("\n")
    d = {"data_head": data.reshape((-1,))[:64]}
    for i, o in enumerate(outs):
        d["out%d" % i] = o.astype("float32")
    mx.nd.save(os.path.join(OUT, name + ".params"), d)
    stats = ["%s max|.| %.3g std %.3g" % (o.shape, np.abs(o.asnumpy()).max(),
                                          o.asnumpy().std()) for o in outs]
    print("%-20s in %s, %d params: %s" % (name, shape, len(list(net.collect_params().keys())), stats))


def main():
    os.makedirs(OUT, exist_ok=True)
    names = sys.argv[1:] or list(VISION) + ["transformer_encoder", "lstm_lm"]
    for name in names:
        if name == "lstm_lm" and os.environ["MXNET_MKLDNN_ENABLED"] != "1":
            # MXNet 1.9.1's RNN without MKL-DNN refuses an LSTM ("Check failed:
            # in_data.size() == num_inputs (4 vs. 3)"), so this one runs with it.
            env = dict(os.environ, MXNET_MKLDNN_ENABLED="1")
            subprocess.run([sys.executable, __file__, name], env=env, check=True)
        else:
            run(name)


if __name__ == "__main__":
    main()
