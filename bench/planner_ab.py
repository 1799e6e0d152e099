#!/usr/bin/env python3
"""Two mdplan binaries side by side: the CPU time (user + system) and the
page faults of `mdplan MODEL -o plan.mdp` for each, on bench/gen_graph.py
MLPs of the given sizes, runs alternating, medians reported with the ratio
before / after (> 1: the second binary is faster). Also says whether the
two plans are byte-identical, and if not whether their text dumps
(`--dump-plan`, by the second binary) are.

  bench/planner_ab.py BEFORE AFTER [--sizes=2000,8000] [--reps=3]
                      [--kind=mlp|resnet] [--clones=1]
                      [--strategy=ps|mirrored]

BEFORE and AFTER are mdplan executables, e.g. one built from an older
commit (git worktree add /tmp/base OLD && cmake ... && ninja mdplan).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(binary, args):
    """CPU seconds and minor page faults of one run of binary."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary] + args, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, after.ru_minflt - before.ru_minflt


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--sizes", default="2000,8000")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--kind", default="mlp", choices=["mlp", "resnet"])
    p.add_argument("--clones", type=int, default=1)
    p.add_argument("--strategy", default="ps", choices=["ps", "mirrored"])
    a = p.parse_args()
    for b in (a.before, a.after):
        if not os.access(b, os.X_OK):
            sys.exit(f"planner_ab.py: '{b}' is not an executable")
    load = os.getloadavg()
    print(f"# {a.before} against {a.after}, {a.clones} clone(s), "
          f"{a.strategy}, {a.reps} reps interleaved, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'size':>7} {'before s':>9} {'after s':>9} {'ratio':>6} "
          f"{'faults before':>14} {'faults after':>13} {'MB before':>10} "
          f"{'MB after':>9}  plans")
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(s) for s in a.sizes.split(",")]:
            model = os.path.join(tmp, f"{a.kind}{size}.mdg")
            flag = "--layers" if a.kind == "mlp" else "--blocks"
            subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                            a.kind, f"{flag}={size}", "-o", model], check=True)
            plans = [os.path.join(tmp, "before.mdp"), os.path.join(tmp, "after.mdp")]
            times = [[], []]
            faults = [[], []]
            for r in range(a.reps):
                # Alternate which binary goes first.
                order = [0, 1] if r % 2 == 0 else [1, 0]
                for i in order:
                    binary = (a.before, a.after)[i]
                    cpu, flt = run(binary, [model, f"--num-clones={a.clones}",
                                            f"--strategy={a.strategy}",
                                            "-o", plans[i]])
                    times[i].append(cpu)
                    faults[i].append(flt)
            with open(plans[0], "rb") as f0, open(plans[1], "rb") as f1:
                same = f0.read() == f1.read()
            verdict = "byte-identical"
            if not same:
                dumps = []
                for i in range(2):
                    out = subprocess.run([a.after, "--dump-plan", plans[i]],
                                         check=True, capture_output=True).stdout
                    dumps.append(out)
                verdict = ("same text dump" if dumps[0] == dumps[1]
                           else "DIFFERENT")
            tb, ta = statistics.median(times[0]), statistics.median(times[1])
            mb = [os.path.getsize(x) / 1e6 for x in plans]
            print(f"{size:>7} {tb:>9.2f} {ta:>9.2f} {tb / ta:>6.2f} "
                  f"{int(statistics.median(faults[0])):>14} "
                  f"{int(statistics.median(faults[1])):>13} {mb[0]:>10.1f} "
                  f"{mb[1]:>9.1f}  {verdict}")


if __name__ == "__main__":
    main()
