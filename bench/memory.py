#!/usr/bin/env python3
"""Memory plan numbers: for the MLP and CNN examples under several
deployments, the arena peak that plan-memory found next to the naive sum
(every transient buffer in its own place), per program and device, from
`mdplan --emit=plan-text` (docs/PlanFormat.md).

  bench/memory.py [--build=DIR] [--markdown]

Deployments: 1, 2 and 4 clones on the CPU (--clone-on-cpu: one device
holds every clone); 2 clones on GPUs, ps and mirrored, and 4 mirrored (one
arena per GPU, plus the worker CPU). Persistent bytes (variables, slots,
constants) are outside the arena and listed separately per device.
BUILD defaults to $BUILD or build/.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = [("mlp", "examples/fashion_mlp.mdg"), ("cnn", "examples/tf_tutorial_cnn.mdg")]
DEPLOYS = [
    ("cpu x1", ["--clone-on-cpu", "--num-clones=1"]),
    ("cpu x2", ["--clone-on-cpu", "--num-clones=2"]),
    ("cpu x4", ["--clone-on-cpu", "--num-clones=4"]),
    ("gpu x2 ps", ["--num-clones=2", "--strategy=ps"]),
    ("gpu x2 mirrored", ["--num-clones=2", "--strategy=mirrored"]),
    ("gpu x4 mirrored", ["--num-clones=4", "--strategy=mirrored"]),
]
DEV = re.compile(r"^device (d\d+) (\S+) \w+ arena=(\d+) .*persistent=(\d+)")
PROG = re.compile(r"^program (\w+) batch=(\d+)")
PDEV = re.compile(r"^  device (d\d+) kernels=(\d+) peak=(\d+) .*naive=(\d+) .*planner=(\S+)")


def human(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def short(dev):
    m = re.search(r"/job:(\w+)/replica:\d+/task:(\d+)/device:(\w+):(\d+)", dev)
    return f"{m.group(1)}{m.group(2)}:{m.group(3)}:{m.group(4)}" if m else dev


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    mdplan = os.path.join(build, "bin", "mdplan")
    if not os.access(mdplan, os.X_OK):
        sys.exit(f"memory.py: no {mdplan}; build first (scripts/setup.sh) or set BUILD")
    rows = []
    for model, path in MODELS:
        for name, flags in DEPLOYS:
            r = subprocess.run([mdplan, os.path.join(ROOT, path), *flags, "--emit=plan-text"],
                               capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"memory.py: mdplan {path} {' '.join(flags)} failed:\n{r.stderr}")
            devs, prog, batch = {}, None, None
            for line in r.stdout.splitlines():
                if m := DEV.match(line):
                    devs[m.group(1)] = (short(m.group(2)), int(m.group(4)))
                elif m := PROG.match(line):
                    prog, batch = m.group(1), int(m.group(2))
                elif (m := PDEV.match(line)) and prog:
                    d, k, peak, naive, planner = m.groups()
                    rows.append((model, name, prog, batch, devs[d][0], int(k), int(peak),
                                 int(naive), planner, devs[d][1]))
    if a.markdown:
        print("| model | deployment | program (batch) | device | kernels | arena peak | naive sum "
              "| peak / naive | planner | persistent |")
        print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
        for (model, name, prog, batch, dev, k, peak, naive, planner, pers) in rows:
            ratio = f"{peak / naive:.2f}" if naive else "-"
            print(f"| {model} | {name} | {prog} ({batch}) | {dev} | {k} | {human(peak)} | "
                  f"{human(naive)} | {ratio} | {planner} | {human(pers)} |")
    else:
        print(f"{'model':5} {'deployment':16} {'program':10} {'device':14} {'kernels':>7} "
              f"{'peak':>12} {'naive':>12} {'peak/naive':>10}  planner")
        for (model, name, prog, batch, dev, k, peak, naive, planner, pers) in rows:
            ratio = f"{peak / naive:.2f}" if naive else "-"
            print(f"{model:5} {name:16} {prog + '/' + str(batch):10} {dev:14} {k:>7} "
                  f"{peak:>12} {naive:>12} {ratio:>10}  {planner}")


if __name__ == "__main__":
    main()
