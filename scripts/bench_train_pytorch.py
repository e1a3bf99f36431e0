#!/usr/bin/env python3
"""PyTorch baseline of bench/bench_train.c: training and inference throughput and peak RSS
of the MLP 784-128-64-10 (ReLU), MXNet's LeNet and the ResNet-18 of mxc_net_resnet at batch
100 on this machine's cores.

Measures, per case (the same as bench_train, on the same synthetic data sizes: random
pixels in [0, 1) and random labels; throughput does not depend on the values):
  mlp_train / lenet_train  samples/s over one epoch (--epochs-samples, default 60,000)
                           after one warm-up batch: copy the batch into preallocated
                           input tensors, forward, cross-entropy, backward, SGD step
                           (MLP lr 0.1; LeNet lr 0.05 momentum 0.9), Xavier init
  resnet_train             the same over --resnet-samples (default 500) of 3x32x32:
                           ResNet-18 as mxc_net_resnet(2, 10) builds it (3x3 stem of 64,
                           four stages of two basic blocks of 64-512 channels, 1x1
                           projections, BatchNorm eps 0.001, global average pooling),
                           SGD lr 0.1 momentum 0.9
  mlp_infer / lenet_infer  samples/s of forward under torch.no_grad() over 10,000 samples
                           (--infer-samples) after one warm-up batch
  peak_rss_mib             resource.getrusage(RUSAGE_SELF).ru_maxrss of the child process
                           that ran the case (it includes the synthetic data set)
With --repeats R (default 3) the epoch is timed R times in the same child and the median
is reported.

PyTorch "at its best" on this machine: each case runs in a fresh subprocess under two
settings, because OPENBLAS_NUM_THREADS is read when torch (and OpenBLAS) is loaded:
  torch2            torch.set_num_threads(2), OPENBLAS_NUM_THREADS unset
  torch2_openblas1  torch.set_num_threads(2), OPENBLAS_NUM_THREADS=1
The faster one is reported (`threads`), with both settings' figures in the same line.

Run with Debian's python, which is the one python3-torch installs for (the python3 first
on PATH may not have torch):
  /usr/bin/python3 scripts/bench_train_pytorch.py [--json] [--quick] [--cases mlp_train,...]
      [--epochs-samples N] [--infer-samples N] [--resnet-samples N] [--repeats R]
Prints a table, or with --json one JSON object per case:
  {"bench": "train", "case": ..., "system": "pytorch", "samples_per_s": ...,
   "peak_rss_mib": ..., "threads": "torch2_openblas1", "samples_per_s_torch2": ...,
   "peak_rss_mib_torch2": ..., "samples_per_s_torch2_openblas1": ..., ...,
   "torch_version": ...}
If torch is missing it prints {"bench": "train", "system": "pytorch", "error": ...} and
exits with status 3. bench_train runs this script as its child process.
"""
import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = ["mlp_train", "mlp_infer", "lenet_train", "lenet_infer", "resnet_train"]
SETTINGS = ["torch2", "torch2_openblas1"]
BATCH = 100


def setting_env(setting):
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if setting == "torch2_openblas1":
        env["OPENBLAS_NUM_THREADS"] = "1"
    return env


# ---- Child: one case under one setting (torch imported here, after the env is set) ----

def resnet18(torch):
    nn = torch.nn

    def conv_bn(cin, cout, kernel, stride):  # as model/networks.c's conv_bn
        return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                nn.BatchNorm2d(cout, eps=1e-3, momentum=0.1)]

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(),
                                      *conv_bn(cout, cout, 3, 1))
            self.shortcut = (nn.Sequential(*conv_bn(cin, cout, 1, stride))
                             if stride != 1 else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.shortcut(x))

    layers, cin = conv_bn(3, 64, 3, 1) + [nn.ReLU()], 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for unit in range(2):
            layers.append(Block(cin, cout, 2 if stage > 0 and unit == 0 else 1))
            cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


def build(net, torch):
    nn = torch.nn
    if net == "resnet":
        model = resnet18(torch)
    elif net == "mlp":
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.Tanh(), nn.MaxPool2d(2, 2),
                              nn.Conv2d(20, 50, 5), nn.Tanh(), nn.MaxPool2d(2, 2),
                              nn.Flatten(), nn.Linear(800, 500), nn.Tanh(), nn.Linear(500, 10))
    for m in model.modules():  # Xavier (uniform, fan average, magnitude 3 as MXNet's)
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return model


def run_child(case, args):
    import torch  # noqa: E402  (OPENBLAS_NUM_THREADS was set by the parent)
    torch.set_num_threads(2)
    torch.manual_seed(0)
    net, mode = case.split("_")
    train = mode == "train"
    n = (args.resnet_samples if net == "resnet"
         else args.epochs_samples if train else args.infer_samples)
    n = max(BATCH, n - n % BATCH)
    shape = {"mlp": (n, 784), "lenet": (n, 1, 28, 28), "resnet": (n, 3, 32, 32)}[net]
    data = torch.rand(shape)
    labels = torch.randint(0, 10, (n,))
    xb = torch.empty((BATCH,) + shape[1:])
    yb = torch.empty((BATCH,), dtype=torch.int64)
    model = build(net, torch)
    lossf = torch.nn.CrossEntropyLoss()
    if net == "mlp":
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    elif net == "lenet":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_batch(i):
        xb.copy_(data[i * BATCH:(i + 1) * BATCH])
        yb.copy_(labels[i * BATCH:(i + 1) * BATCH])
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()

    def infer_batch(i):
        xb.copy_(data[i * BATCH:(i + 1) * BATCH])
        with torch.no_grad():
            model(xb)

    if train:
        model.train()
        step = train_batch
    else:
        model.eval()
        step = infer_batch
    step(0)  # warm-up batch
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for i in range(n // BATCH):
            step(i)
        rates.append(n / (time.perf_counter() - t0))
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"case": case, "samples_per_s": statistics.median(rates),
                      "samples_per_s_runs": rates, "peak_rss_mib": rss_kib / 1024.0,
                      "samples": n, "torch_version": torch.__version__,
                      "torch_threads": torch.get_num_threads(),
                      "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS")}),
          flush=True)


# ---- Parent: every case under both settings, each in a fresh subprocess ---------------

def run_setting(case, setting, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case,
           "--epochs-samples", str(args.epochs_samples),
           "--infer-samples", str(args.infer_samples),
           "--resnet-samples", str(args.resnet_samples), "--repeats", str(args.repeats)]
    p = subprocess.run(cmd, env=setting_env(setting), stdout=subprocess.PIPE, text=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write("bench_train_pytorch: %s under %s failed (status %d)\n"
                     % (case, setting, p.returncode))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--quick", action="store_true",
                    help="6,000 training (ResNet-18: 200) and 2,000 inference samples, "
                    "1 repeat")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    ap.add_argument("--epochs-samples", type=int, default=60000)
    ap.add_argument("--infer-samples", type=int, default=10000)
    ap.add_argument("--resnet-samples", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.epochs_samples = min(args.epochs_samples, 6000)
        args.infer_samples = min(args.infer_samples, 2000)
        args.resnet_samples = min(args.resnet_samples, 200)
        args.repeats = 1
    args.repeats = max(1, args.repeats)
    if args.child:
        run_child(args.child, args)
        return 0
    if importlib.util.find_spec("torch") is None:
        msg = ("torch is not installed for %s (Debian's python3-torch: "
               "apt-get install -y python3-torch, or scripts/deps.sh --bench)" % sys.executable)
        sys.stderr.write("bench_train_pytorch: %s\n" % msg)
        print(json.dumps({"bench": "train", "system": "pytorch", "error": msg}), flush=True)
        return 3
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            ap.error("unknown case %s (cases: %s)" % (c, ", ".join(CASES)))
    if not args.json:
        print("%-12s %14s %14s %10s %18s" % ("case", "torch2 /s", "openblas1 /s",
                                               "RSS MiB", "best"))
    status = 0
    for case in cases:
        res = {s: run_setting(case, s, args) for s in SETTINGS}
        ok = {s: r for s, r in res.items() if r is not None}
        out = {"bench": "train", "case": case, "system": "pytorch"}
        if not ok:
            status = 1
            out["error"] = "every setting failed"
            print(json.dumps(out), flush=True)
            continue
        best = max(ok, key=lambda s: ok[s]["samples_per_s"])
        out.update({"samples_per_s": ok[best]["samples_per_s"],
                    "peak_rss_mib": ok[best]["peak_rss_mib"], "threads": best})
        for s in SETTINGS:
            r = res[s]
            out["samples_per_s_" + s] = r["samples_per_s"] if r else None
            out["peak_rss_mib_" + s] = r["peak_rss_mib"] if r else None
        out.update({"samples": ok[best]["samples"], "repeats": args.repeats,
                    "torch_version": ok[best]["torch_version"]})
        if args.json:
            print(json.dumps(out), flush=True)
        else:
            def fmt(s):
                return "%14.0f" % res[s]["samples_per_s"] if res[s] else "%14s" % "failed"
            print("%-12s %s %s %10.1f %18s" % (case, fmt("torch2"), fmt("torch2_openblas1"),
                                                 out["peak_rss_mib"], best), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
