#!/usr/bin/env python3
"""Multi-worker mirrored training over MPI against one process, side by side.

For each model (the MLP and the CNN examples, clones on the CPU, mirrored,
SGD) and repetition, in turn:

  one       1 process, 1 clone, global batch B, --threads=P
  procs     P processes (mpirun -n P), 1 clone each, global batch B,
            --threads=1 each, --overlap=off: the same work split over
            processes, every all-reduce blocking its device
  overlap   procs with --overlap=on: the sums cross beside the computation
  yield     overlap, Open MPI told to yield the core while it waits
            (--mca mpi_yield_when_idle 1)
  alone     1 process, 1 clone, batch B/P, --threads=1: one process's share
            of `procs` without the others

Every run trains a fixed number of steps (MODELS below: the MLP 600,
the CNN 40) on Fashion-MNIST in order (no evaluation) and
reports examples per second from mdrun's done line. Printed: medians, the
speed-up of `procs` over `one` (strong scaling on P cores), the cost of
the all-reduce across processes, time per step of `procs` over `alone`
(1.0: free), and what overlapping it gains, `procs` over `overlap` and
over `yield` (> 1: overlapping is faster). The load average is printed; compare numbers from one run.

With --baseline=MDRUN (another build's mdrun, e.g. of an older commit),
`base` and `base-overlap` run `procs` and `overlap` with it, and the
ratios say how much faster this build's are (> 1: this build).

  bench/processes.py [--procs=2] [--reps=3] [--models=mlp,cnn]
                     [--baseline=MDRUN]
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
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
DATA = "/usr/share/datasets/fashion-mnist"
MODELS = {
    # example, global batch, steps
    "mlp": ("fashion_mlp.mdg", 64, 600),
    "cnn": ("tf_tutorial_cnn.mdg", 100, 40),
}
DONE = re.compile(r"^done: (\d+) steps? in ([0-9.e+-]+) s \((\d+) examples/s\)")


def tool(name):
    path = os.path.join(BUILD, "bin", name)
    if not os.access(path, os.X_OK):
        sys.exit(f"processes.py: no {path} (build first, or set BUILD)")
    return path


def mpirun():
    cmd = ["mpirun", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def compile_plans(tmp, model, batch, procs):
    mdplan = tool("mdplan")
    base = [mdplan, os.path.join(ROOT, "examples", model), "--clone-on-cpu",
            "--strategy=mirrored", "--optimizer=sgd", "--learning-rate=0.01"]
    plans = {}
    plans["one"] = os.path.join(tmp, "one.mdp")
    subprocess.run(base + [f"--global-batch={batch}", "-o", plans["one"]],
                   check=True)
    plans["alone"] = os.path.join(tmp, "alone.mdp")
    subprocess.run(base + [f"--global-batch={batch // procs}", "-o",
                           plans["alone"]], check=True)
    plans["procs"] = os.path.join(tmp, "procs.{replica}.mdp")
    subprocess.run(base + [f"--global-batch={batch}",
                           f"--num-replicas={procs}", "-o", plans["procs"]],
                   check=True)
    return plans


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        m = DONE.match(line)
        if m:
            return int(m.group(1)), float(m.group(2)), int(m.group(3))
    sys.exit("processes.py: no done line from " + " ".join(cmd))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--baseline", default="")
    a = p.parse_args()
    for name in a.models.split(","):
        if name not in MODELS:
            sys.exit(f"processes.py: unknown model '{name}' (known: "
                     f"{', '.join(MODELS)})")
    if a.baseline and not os.access(a.baseline, os.X_OK):
        sys.exit(f"processes.py: '{a.baseline}' is not an executable")
    if not os.path.isdir(DATA):
        sys.exit(f"processes.py: no {DATA} (Debian: dataset-fashion-mnist)")
    mdrun = tool("mdrun")
    load = os.getloadavg()
    print(f"# {a.procs} processes, {a.reps} reps interleaved, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'model':>5} {'config':>12} {'batch':>6} {'ms/step':>8} "
          f"{'examples/s':>11}")
    for name in a.models.split(","):
        model, batch, steps = MODELS[name]
        with tempfile.TemporaryDirectory() as tmp:
            plans = compile_plans(tmp, model, batch, a.procs)
            common = [f"--data={DATA}", f"--steps={steps}", "--no-eval",
                      "--no-shuffle", "--log-every=0", "--no-progress"]
            def procs(mode, mca=(), binary=mdrun):
                return (mpirun() + list(mca) +
                        ["-n", str(a.procs), binary, plans["procs"],
                         "--threads=1", f"--overlap={mode}"] + common)
            cmds = {
                "one": [mdrun, plans["one"], f"--threads={a.procs}"] + common,
                "procs": procs("off"),
                "alone": [mdrun, plans["alone"], "--threads=1"] + common,
                "overlap": procs("on"),
                "yield": procs("on", ["--mca", "mpi_yield_when_idle", "1"]),
            }
            if a.baseline:
                cmds["base"] = procs("off", binary=a.baseline)
                cmds["base-overlap"] = procs("on", binary=a.baseline)
            times = {k: [] for k in cmds}
            rates = {k: [] for k in cmds}
            for r in range(a.reps):
                order = list(cmds) if r % 2 == 0 else list(reversed(cmds))
                for k in order:
                    n, secs, rate = run(cmds[k])
                    times[k].append(secs / n * 1e3)
                    rates[k].append(rate)
            med = {k: statistics.median(v) for k, v in times.items()}
            for k in cmds:
                b = batch // a.procs if k == "alone" else batch
                print(f"{name:>5} {k:>12} {b:>6} {med[k]:>8.3f} "
                      f"{statistics.median(rates[k]):>11.0f}")
            print(f"{name:>5} speed-up of {a.procs} processes over one "
                  f"process of {a.procs} threads: {med['one'] / med['procs']:.2f}; "
                  f"step time of {a.procs} processes over one process's share "
                  f"alone: {med['procs'] / med['alone']:.2f}; "
                  f"blocking all-reduces over overlapped: "
                  f"{med['procs'] / med['overlap']:.2f}, over overlapped "
                  f"and yielding: {med['procs'] / med['yield']:.2f}")
            if a.baseline:
                print(f"{name:>5} baseline over this build: blocking "
                      f"{med['base'] / med['procs']:.2f}, overlapped "
                      f"{med['base-overlap'] / med['overlap']:.2f}")


if __name__ == "__main__":
    main()
