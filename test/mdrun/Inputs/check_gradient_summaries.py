"""Checks the gradient summaries of a run's first step (summarize_gradients)
against the gradients the step applied, taken from its checkpoints.

usage: check_gradient_summaries.py METRICS LEARNING_RATE BEFORE AFTER

METRICS is the run's --metrics file; BEFORE and AFTER are `mdrun
--print-checkpoint` outputs of the checkpoints at steps 0 and 1 of a plain
SGD run, whose step set every trainable variable w to w - lr * g: so g is
(before - after) / lr. For every `<var>:gradient` histogram of step 1, its
min, max and mean must be g's and `<var>:gradient_norm` must be g's
Euclidean norm (relative 1e-4: before and after are float32). Prints one
line per variable, and exits 1 on a mismatch or when a variable of the
checkpoint has no summary.
"""
import json
import math
import sys


def tensors(path):
    out = {}
    for line in open(path):
        if line.startswith("tensor "):
            head, _, values = line.rstrip("\n").partition(" =")
            _, name, desc = head.split()
            if desc.startswith("float"):
                out[name] = [float(v) for v in values.split()]
    return out


def close(got, want, scale):
    return abs(got - want) <= 1e-4 * max(scale, 1e-30)


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: check_gradient_summaries.py METRICS LEARNING_RATE "
                 "BEFORE AFTER")
    metrics, lr, before, after = sys.argv[1:5]
    lr = float(lr)
    step1 = [json.loads(l) for l in open(metrics)]
    step1 = [m for m in step1 if m.get("step") == 1 and "loss" in m][0]
    b, a = tensors(before), tensors(after)
    bad = 0
    names = sorted(k[: -len(":gradient")] for k in step1
                   if k.endswith(":gradient"))
    if not names:
        sys.exit("no <var>:gradient summary in " + metrics)
    for var in names:
        g = [(x - y) / lr for x, y in zip(b[var], a[var])]
        hist = step1[var + ":gradient"]
        norm = step1[var + ":gradient_norm"]
        want = {"min": min(g), "max": max(g), "mean": sum(g) / len(g)}
        scale = max(abs(x) for x in g)
        ok = all(close(hist[k], want[k], scale) for k in want)
        n = math.sqrt(sum(x * x for x in g))
        ok = ok and all(close(norm[k], n, n) for k in ("min", "max", "mean"))
        print("%s %s: %d values, norm %.6g (summary %.6g)" % (
            "ok" if ok else "MISMATCH", var, len(g), n, norm["mean"]))
        if not ok:
            print("  summary %s, from the checkpoints %s" % (hist, want))
            bad += 1
    # Every variable that moved has its summaries.
    for var in sorted(b):
        if var in a and b[var] != a[var] and var not in names \
                and var != "global_step":
            print("MISSING %s: changed, but has no gradient summary" % var)
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
