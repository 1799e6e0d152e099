#!/usr/bin/env python3
"""Two mdrun binaries side by side: the time per step of each on the same
plans, runs alternating, medians reported with the ratio before / after
(> 1: the second binary is faster).

The plans are compiled once, by $BUILD/bin/mdplan, and run with synthetic
data, no evaluation and --soft-placement (GPU devices the machine lacks
run on the CPU, each on its own thread, so a GPU plan measures the
executor's hand-offs between devices):

  tiny-1dev   bench/gen_graph.py tiny --ops=300 on one CPU device
              (dispatch of 304 kernels, no hand-off)
  tiny-2dev   the same model planned for one GPU (the default deployment):
              two devices, the inputs, the loss and the global step
              crossing between them
  tiny-4dev   three GPU clones, mirrored: four devices and an all-reduce
  mlp-ps      examples/fashion_mlp.mdg, one GPU, ps (variables on the CPU)
  cnn-ps      examples/tf_tutorial_cnn.mdg, one GPU, ps

  bench/mdrun_ab.py BEFORE AFTER [--plans=tiny-1dev,tiny-2dev]
                    [--reps=5] [--threads=1] [--scale=1.0] [--load=0]

BEFORE and AFTER are mdrun executables, e.g. one built from an older
commit (git worktree add /tmp/base OLD && cmake ... && ninja mdrun).
--scale multiplies every plan's step count (shorter or longer runs).
--load=N runs N busy loops beside the measurements, as other users'
processes would on a shared machine. The environment reaches both
binaries (MDRT_SPIN_WAIT=1, say).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (model, mdplan options, steps)
PLANS = {
    "tiny-1dev": ("tiny", ["--clone-on-cpu"], 20000),
    "tiny-2dev": ("tiny", [], 20000),
    "tiny-4dev": ("tiny", ["--num-clones=3", "--gpus-per-worker=3",
                           "--strategy=mirrored"], 10000),
    "mlp-ps": ("examples/fashion_mlp.mdg", [], 1500),
    "cnn-ps": ("examples/tf_tutorial_cnn.mdg", [], 30),
}


def step_us(mdrun, plan, steps, threads):
    """Microseconds per step of one run (mdrun's own 'done:' line)."""
    out = subprocess.run(
        [mdrun, plan, "--synthetic", "--steps=%d" % steps, "--no-eval",
         "--log-every=0", "--no-progress", "--soft-placement",
         "--threads=%d" % threads],
        capture_output=True, text=True, env=dict(os.environ,
                                                 CUDA_VISIBLE_DEVICES=""))
    if out.returncode != 0:
        sys.exit("mdrun_ab: %s failed on %s:\n%s" % (mdrun, plan, out.stderr))
    m = re.search(r"done: (\d+) steps? in ([0-9.e+-]+) s", out.stdout)
    if not m:
        sys.exit("mdrun_ab: no 'done:' line from %s:\n%s" % (mdrun,
                                                             out.stdout))
    return 1e6 * float(m.group(2)) / int(m.group(1))


def main():
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--plans", default=",".join(PLANS))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--load", type=int, default=0)
    a = p.parse_args()
    build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
    if not os.path.isabs(build) and not os.path.isdir(build):
        build = os.path.join(ROOT, build)  # relative to the repository
    mdplan = os.path.join(build, "bin", "mdplan")
    if not os.access(mdplan, os.X_OK):
        sys.exit("mdrun_ab: no %s (build first, or set BUILD)" % mdplan)
    names = a.plans.split(",")
    for n in names:
        if n not in PLANS:
            sys.exit("mdrun_ab: unknown plan '%s' (known: %s)" %
                     (n, ", ".join(PLANS)))
    for b in (a.before, a.after):
        if not os.access(b, os.X_OK):
            sys.exit("mdrun_ab: '%s' is not an executable" % b)
    tmp = tempfile.mkdtemp(prefix="mdrun_ab.")
    tiny = os.path.join(tmp, "tiny.mdg")
    with open(tiny, "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                        "tiny", "--ops=300"], stdout=f, check=True)
    plans = {}
    for n in names:
        model, opts, _ = PLANS[n]
        src = tiny if model == "tiny" else os.path.join(ROOT, model)
        plans[n] = os.path.join(tmp, n + ".mdp")
        subprocess.run([mdplan, src] + opts + ["-o", plans[n]], check=True)
    times = {(n, s): [] for n in names for s in ("before", "after")}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(a.load)]
    try:
        measure(a, names, plans, times)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    print("| plan | before: us/step | after: us/step | before / after |")
    print("| --- | ---: | ---: | ---: |")
    for n in names:
        b = statistics.median(times[(n, "before")])
        f = statistics.median(times[(n, "after")])
        print("| %s | %.1f | %.1f | %.2f |" % (n, b, f, b / f))


def measure(a, names, plans, times):
    """Runs every plan under both binaries, a.reps times, alternating."""
    if a.load:
        print("with %d busy loops" % a.load)
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    for r in range(a.reps):
        for n in names:
            steps = max(1, int(PLANS[n][2] * a.scale))
            # Alternate which binary goes first.
            order = [("before", a.before), ("after", a.after)]
            if r % 2:
                order.reverse()
            for side, binary in order:
                times[(n, side)].append(step_us(binary, plans[n], steps,
                                                a.threads))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
