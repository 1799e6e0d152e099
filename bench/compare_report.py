#!/usr/bin/env python3
"""Summarizes the results directory of bench/compare.sh.

  compare_report.py DIR

Per (model, threads): the median over repetitions of each run's median
time per step, for mdrun and PyTorch, the ratio PyTorch / mdrun (> 1 means
mdrun is faster), and for the tiny-op chain the time per kernel. When
mdrun traces are there (trace-<model>-t<N>.json), a breakdown per op of
the traced steps: total kernel time per op kind, and the time between
kernels (dispatch).
"""
import collections
import glob
import json
import os
import re
import statistics
import sys

BATCH = {"mlp": 64, "cnn": 100, "resnet": 64, "tiny": 1}
WARMUP = {"mlp": 100, "cnn": 10, "resnet": 10, "tiny": 2000}


def mdrun_step_ms(path, model):
    vals = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "examples_per_sec" not in d or d["step"] <= WARMUP[model]:
                continue
            vals.append(1000.0 * BATCH[model] / d["examples_per_sec"])
    return statistics.median(vals) if vals else None


def torch_step_ms(path):
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d.get("done"):
                return d["median_step_ms"]
    return None


def trace_summary(path):
    with open(path) as f:
        t = json.load(f)
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    if not ev:
        return None
    by_tid = collections.defaultdict(list)
    for e in ev:
        by_tid[e["tid"]].append(e)
    per_op = collections.Counter()
    count = collections.Counter()
    busy = 0.0
    span = 0.0
    for tid, es in by_tid.items():
        es.sort(key=lambda e: e["ts"])
        span = max(span, es[-1]["ts"] + es[-1]["dur"] - es[0]["ts"])
        for e in es:
            per_op[e["cat"]] += e["dur"]
            count[e["cat"]] += 1
            busy += e["dur"]
    return {"kernels": len(ev), "busy_us": busy, "span_us": span,
            "per_op_us": per_op, "count": count}


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: bench/compare_report.py DIR (a bench/compare.sh "
                 "output directory)")
    d = sys.argv[1]
    if not glob.glob(os.path.join(d, "*-t*-r*.jsonl")):
        sys.exit("compare_report.py: no bench/compare.sh results "
                 "(*-t*-r*.jsonl) in '%s'" % d)
    rows = collections.defaultdict(lambda: {"mdrun": [], "torch": []})
    for p in glob.glob(os.path.join(d, "*-t*-r*.jsonl")):
        m = re.match(r"(mdrun|torch)-(\w+)-t(\d+)-r(\d+)\.jsonl", os.path.basename(p))
        if not m:
            continue
        impl, model, n = m.group(1), m.group(2), int(m.group(3))
        v = mdrun_step_ms(p, model) if impl == "mdrun" else torch_step_ms(p)
        if v is not None:
            rows[(model, n)][impl].append(v)
    kernels = None
    kp = os.path.join(d, "tiny.kernels")
    if os.path.exists(kp):
        m = re.search(r"kernels=(\d+)", open(kp).read())
        kernels = int(m.group(1)) if m else None
    tiny_ops = None
    tg = os.path.join(d, "tiny.mdg")
    if os.path.exists(tg):
        tiny_ops = sum(1 for l in open(tg) if re.search(r'name: "op\d+"', l))

    print("time per training step, median over repetitions (each run: median over "
          "its timed intervals)")
    print(f"{'model':6} {'threads':>7} {'reps':>4} {'mdrun ms':>10} {'torch ms':>10} "
          f"{'torch/mdrun':>11}  per-rep mdrun | torch")
    for (model, n) in sorted(rows, key=lambda k: (["mlp", "cnn", "resnet", "tiny"].index(k[0])
                                                  if k[0] in BATCH else 9, k[1])):
        r = rows[(model, n)]
        if not r["mdrun"] or not r["torch"]:
            continue
        a, b = statistics.median(r["mdrun"]), statistics.median(r["torch"])
        print(f"{model:6} {n:>7} {len(r['mdrun']):>4} {a:>10.4f} {b:>10.4f} {b / a:>11.2f}  "
              + " ".join(f"{x:.4g}" for x in r["mdrun"]) + " | "
              + " ".join(f"{x:.4g}" for x in r["torch"]))
        if model == "tiny" and kernels and tiny_ops:
            print(f"       tiny: mdrun {kernels} kernels/step -> {1000 * a / kernels:.3f} us "
                  f"per kernel; torch {tiny_ops + 1} ops/step (+ .item()) -> "
                  f"{1000 * b / (tiny_ops + 1):.3f} us per op")

    for p in sorted(glob.glob(os.path.join(d, "trace-*.json"))):
        s = trace_summary(p)
        if not s:
            continue
        print(f"\n{os.path.basename(p)}: {s['kernels']} kernel events, kernels busy "
              f"{s['busy_us']:.0f} us of a {s['span_us']:.0f} us span "
              f"({100 * s['busy_us'] / max(s['span_us'], 1e-9):.0f}%; the rest is dispatch, "
              f"waits and the host between steps)")
        top = s["per_op_us"].most_common(8)
        print("  by op: " + ", ".join(
            f"{op} {us:.0f} us ({100 * us / s['busy_us']:.0f}%, {s['count'][op]}x)"
            for op, us in top))


if __name__ == "__main__":
    main()
