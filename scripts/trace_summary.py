#!/usr/bin/env python3
"""Where the time goes in an engine profiler trace (docs/engine.md, "Profiler").

Reads the Chrome-trace JSON that the engine writes (MXC_PROFILER_AUTOSTART=1
MXC_PROFILER_OUTPUT=trace.json) and prints, per operation name, how many times it ran,
its total time, its share of all operation time and its median duration; with
--by-occurrence N, the operations of one repeated step (N of them per step, e.g. the four
Convolution calls of a LeNet training step: two forward, two backward) are told apart by
their position in the step, and each position's median is printed.

    MXC_PROFILER_AUTOSTART=1 MXC_PROFILER_OUTPUT=/tmp/trace.json \\
        build/bin/bench_train --child lenet_train --epochs-samples 3000 --repeats 1
    python3 scripts/trace_summary.py /tmp/trace.json
    python3 scripts/trace_summary.py /tmp/trace.json --by-occurrence Convolution=4

Standard library only.
"""
import argparse
import collections
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--by-occurrence", action="append", default=[], metavar="NAME=N",
                    help="split NAME's calls into N positions per step (repeatable)")
    ap.add_argument("--skip-steps", type=int, default=2,
                    help="steps left out at the start (warm-up) with --by-occurrence")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        sys.exit("trace_summary: no operations in %s" % args.trace)
    events.sort(key=lambda e: e["ts"])
    by_name = collections.defaultdict(list)
    for e in events:
        by_name[e["name"]].append(e["dur"])
    total = sum(sum(v) for v in by_name.values())
    print("%-24s %7s %11s %7s %12s" % ("operation", "calls", "total ms", "share", "median us"))
    for name, durs in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
        print("%-24s %7d %11.1f %6.1f%% %12.1f" % (name, len(durs), sum(durs) / 1000,
                                                   100 * sum(durs) / total,
                                                   statistics.median(durs)))
    for spec in args.by_occurrence:
        name, _, n = spec.partition("=")
        if not n.isdigit() or int(n) < 1 or name not in by_name:
            sys.exit("trace_summary: --by-occurrence %s: want NAME=N with NAME in the trace"
                     % spec)
        n = int(n)
        durs = by_name[name][n * args.skip_steps:]
        print("\n%s, by position in the step (%d per step, %d steps):"
              % (name, n, len(durs) // n))
        for i in range(n):
            at = durs[i::n]
            if at:
                print("  #%d  median %10.1f us" % (i + 1, statistics.median(at)))


if __name__ == "__main__":
    main()
