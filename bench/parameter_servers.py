#!/usr/bin/env python3
"""The ps strategy across processes against the same plans elsewhere, side
by side.

For each model (the MLP and the CNN examples, clones on the CPU, SGD) and
repetition, in turn:

  inproc    1 process: a plan of 1 replica and 1 ps task, the ps device
            beside the worker's in one process (mdrun alone)
  ps        the same plan as 2 processes (mpirun -n 2): the worker, and
            the parameter server; the variables and gradients cross as
            messages
  async     W workers and 1 ps task (mpirun -n W+1), each worker at the
            batch of `inproc`: asynchronous updates, W times the examples
            per step
  mirrored  W processes of the mirrored strategy at a global batch of W
            times that (mpirun -n W): the synchronous alternative

Every run trains a fixed number of steps (processes.py's MODELS: the MLP 600,
the CNN 40) on Fashion-MNIST in order (no evaluation),
--threads=1, and reports examples per second from mdrun's done line.
Printed: medians, the cost of the processes (`ps` over `inproc` time per
step: 1.0 is free) and the throughput of `async` against `mirrored` (> 1:
asynchronous training moves more examples). The load average is printed;
compare numbers from one run.

  bench/parameter_servers.py [--workers=2] [--reps=3] [--models=mlp,cnn]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from processes import DATA, MODELS, ROOT, mpirun, run, tool


def main():
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--models", default="mlp,cnn")
    a = p.parse_args()
    for name in a.models.split(","):
        if name not in MODELS:
            sys.exit(f"parameter_servers.py: unknown model '{name}' (known: "
                     f"{', '.join(MODELS)})")
    if not os.path.isdir(DATA):
        sys.exit(f"parameter_servers.py: no {DATA} "
                 "(Debian: dataset-fashion-mnist)")
    mdplan, mdrun = tool("mdplan"), tool("mdrun")
    W = a.workers
    load = os.getloadavg()
    print(f"# {W} workers, {a.reps} reps interleaved, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'model':>5} {'config':>9} {'procs':>5} {'batch':>6} "
          f"{'ms/step':>8} {'examples/s':>11}")
    for name in a.models.split(","):
        model, batch, steps = MODELS[name]
        with tempfile.TemporaryDirectory() as tmp:
            base = [mdplan, os.path.join(ROOT, "examples", model),
                    "--clone-on-cpu", "--optimizer=sgd",
                    "--learning-rate=0.01"]
            one = os.path.join(tmp, "one.mdp")
            subprocess.run(base + ["--num-ps-tasks=1",
                                   f"--batch-per-clone={batch}", "-o", one],
                           check=True)
            workers = os.path.join(tmp, "ps.{replica}.mdp")
            subprocess.run(base + ["--num-ps-tasks=1",
                                   f"--num-replicas={W}",
                                   f"--batch-per-clone={batch}",
                                   "-o", workers], check=True)
            mirrored = os.path.join(tmp, "m.{replica}.mdp")
            subprocess.run(base + ["--strategy=mirrored",
                                   f"--num-replicas={W}",
                                   f"--global-batch={batch * W}",
                                   "-o", mirrored], check=True)
            common = [f"--data={DATA}", f"--steps={steps}", "--no-eval",
                      "--no-shuffle", "--log-every=0", "--no-progress",
                      "--threads=1"]
            cmds = {
                "inproc": ([mdrun, one] + common, 1, batch),
                "ps": (mpirun() + ["-n", "2", mdrun, one] + common, 2, batch),
                "async": (mpirun() + ["-n", str(W + 1), mdrun, workers] +
                          common, W + 1, batch * W),
                "mirrored": (mpirun() + ["-n", str(W), mdrun, mirrored] +
                             common, W, batch * W),
            }
            times = {k: [] for k in cmds}
            rates = {k: [] for k in cmds}
            for r in range(a.reps):
                order = list(cmds) if r % 2 == 0 else list(reversed(cmds))
                for k in order:
                    n, secs, rate = run(cmds[k][0])
                    times[k].append(secs / n * 1e3)
                    rates[k].append(rate)
            med = {k: statistics.median(v) for k, v in times.items()}
            rate = {k: statistics.median(v) for k, v in rates.items()}
            for k, (_, procs, b) in cmds.items():
                print(f"{name:>5} {k:>9} {procs:>5} {b:>6} {med[k]:>8.3f} "
                      f"{rate[k]:>11.0f}")
            print(f"{name:>5} step time of the server in a process of its "
                  f"own over in-process: {med['ps'] / med['inproc']:.2f}; "
                  f"examples/s of {W} asynchronous workers over {W} "
                  f"mirrored: {rate['async'] / rate['mirrored']:.2f}")


if __name__ == "__main__":
    main()
