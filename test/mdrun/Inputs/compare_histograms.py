"""Compares the x_hist summaries of two metrics files, step by step."""
import json
import sys

one = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
two = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
for a, b in zip(one, two):
    h, g = a["x_hist"], b["x_hist"]
    same = all(abs(h[k] - g[k]) <= 1e-6 * max(1.0, abs(h[k])) for k in h)
    print("step", a["step"], "x_hist", "same" if same else "differs: %s %s" % (h, g))
    # total_loss is the whole step's: the loss of both runs.
    t = abs(a["total_loss"] - b["total_loss"]) <= 1e-5 * max(1.0, abs(a["total_loss"]))
    print("step", a["step"], "total_loss", "same" if t else "differs: %s %s" % (a["total_loss"], b["total_loss"]))
