"""Compares the per-step losses of several mdrun logs (--print-losses):
every step must agree with the first log to a relative tolerance. Prints
the number of runs and steps and the largest relative difference, or says
which step of which log differs and exits 1."""
import sys


def fail(message):
    sys.exit("compare_losses: " + message)


tol = float(sys.argv[1])
runs = []
for path in sys.argv[2:]:
    losses = {}
    for line in open(path):
        p = line.split()
        if len(p) == 4 and p[0] == "step" and p[2] == "loss":
            losses[int(p[1])] = float(p[3])
    runs.append((path, losses))
ref_path, ref = runs[0]
if not ref:
    fail("no losses in " + ref_path)
worst = 0.0
for path, losses in runs[1:]:
    if sorted(losses) != sorted(ref):
        fail(path + ": other steps than " + ref_path)
    for s in sorted(ref):
        rel = abs(losses[s] - ref[s]) / max(abs(ref[s]), 1e-30)
        worst = max(worst, rel)
        if rel > tol:
            fail("%s step %d: loss %.9g vs %.9g in %s (relative %.3g, "
                 "more than %g)" % (path, s, losses[s], ref[s], ref_path, rel,
                                    tol))
print("%d runs, %d steps, largest relative difference %.3g" % (
    len(runs), len(ref), worst))
