#!/usr/bin/env python3
"""Compares the tensors of two checkpoints printed by
`mdrun --print-checkpoint=FILE` (say, one step on the CPU and one on the
GPU): per tensor, the largest absolute difference and that over the largest
magnitude. A diagnostic for tools/gpu/run-gpu-checks.sh: after one SGD step
a wrong gradient shows as a tensor far above the others.

  diff_checkpoints.py CPU.txt GPU.txt [--max REL]

With --max, exits 1 when a tensor differs by more than REL (relative to its
largest magnitude) or the two checkpoints hold different tensors.

Also used by test/mdrun/numpy-reference.test (mdrun against a NumPy
implementation of the models).
"""
import argparse
import sys


def tensors(path):
    out = {}
    for line in open(path):
        if not line.startswith("tensor "):
            continue
        head, _, values = line.partition(" = ")
        name = head.split()[1]
        out[name] = [float(v) for v in values.split()]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--max", type=float)
    args = ap.parse_args()
    a, b = tensors(args.first), tensors(args.second)
    if not a or not b:
        sys.exit("no tensors in %s" % (args.first if not a else args.second))
    worst = 0.0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print("%-40s only in %s" % (
                name, args.second if name in b else args.first))
            worst = float("inf")
            continue
        x, y = a[name], b[name]
        if len(x) != len(y):
            print("%-40s %d against %d values" % (name, len(x), len(y)))
            worst = float("inf")
            continue
        diff = max((abs(p - q) for p, q in zip(x, y)), default=0.0)
        scale = max((abs(p) for p in x), default=0.0)
        rel = diff / scale if scale > 0 else diff
        worst = max(worst, rel)
        print("%-40s %8d values  max |diff| %.3g  relative %.3g" % (
            name, len(x), diff, rel))
    print("largest relative difference %.3g" % worst)
    if args.max is not None and worst > args.max:
        sys.exit("difference above %g" % args.max)


if __name__ == "__main__":
    main()
