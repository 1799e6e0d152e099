"""Compares the evaluation records of several mdrun metrics files
(--metrics): every eval_* value of every evaluated step must agree with the
first file's to a relative tolerance, and every file must have evaluated
the same number of examples."""
import json
import sys

tol = float(sys.argv[1])
runs = []
for path in sys.argv[2:]:
    evals = {}
    for line in open(path):
        r = json.loads(line)
        if "eval_examples" in r:
            evals[r["step"]] = r
    runs.append((path, evals))
ref_path, ref = runs[0]
assert ref, "no evaluation records in " + ref_path
worst = 0.0
for path, evals in runs[1:]:
    assert sorted(evals) == sorted(ref), path + ": other steps than " + ref_path
    for step in sorted(ref):
        a, b = evals[step], ref[step]
        assert sorted(a) == sorted(b), "%s step %d: other keys" % (path, step)
        for k in sorted(b):
            if k == "step":
                continue
            rel = abs(a[k] - b[k]) / max(abs(b[k]), 1e-30)
            worst = max(worst, rel)
            assert rel <= tol, "%s step %d: %s %.9g vs %.9g (relative %.3g)" % (
                path, step, k, a[k], b[k], rel)
print("%d runs, %d evaluations, largest relative difference %.3g" % (
    len(runs), len(ref), worst))
