#!/usr/bin/env python3
"""Planner benchmark: times `mdplan` on generated graphs of growing size,
for several clone counts and both strategies, in two modes:

  placement  --passes=verify,infer-shapes,replicate-clones,place-devices
             --emit=placement (to /dev/null)
  plan       the whole default pipeline and the plan: -o FILE.mdp (train
             and eval programs, verified by the runtime's verifier)

Every run passes --time-passes; the first report on stderr gives the time
of each pass. Wall time is the whole process (parsing the .mdg, the passes,
emitting). Nodes are those of the final graph of the mode's pipeline
(`--emit=placement | wc -l`, counted once per configuration, untimed).

Runs are interleaved: each repetition runs every configuration once, in
turn, so that a change of machine load hits all of them alike. Medians are
reported. Then, per (mode, clones, strategy), the growth of time with the
number of nodes: the ratio of ns/node between successive sizes and the
least-squares slope of log(time) over log(nodes) (1.0 = linear), for the
wall time and for each pass.

  bench/planner.py [--build=DIR] [--kind=mlp|resnet] [--sizes=1000,4000]
                   [--clones=1,2,4,8] [--strategies=ps,mirrored]
                   [--modes=placement,plan] [--reps=3] [--json=FILE]

Sizes are layers (mlp) or blocks (resnet) of bench/gen_graph.py, width 8.
BUILD defaults to $BUILD or build/.
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLACEMENT_PIPELINE = "verify,infer-shapes,replicate-clones,place-devices"

ROW = re.compile(r"^\s+(?:[\d.]+ \(\s*[\d.]+%\)\s+)+([A-Za-z][a-z0-9-]*)\s*$")
NUM = re.compile(r"([\d.]+) \(\s*[\d.]+%\)")


def parse_time_passes(stderr, column):
    """Pass name -> seconds (column -1: wall, -2: user+system), from the
    first pass report on stderr (not the evaluation program's, nor the
    compilation phase report that follows)."""
    out = {}
    reports = 0
    for line in stderr.splitlines():
        if "timing report" in line:
            reports += 1
            if reports > 1 or "Pass execution" not in line:
                break
            continue
        m = ROW.match(line)
        if m and reports == 1:
            nums = NUM.findall(line)
            out[m.group(1)] = float(nums[column])
    return out


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = statistics.mean(lx), statistics.mean(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--kind", default="mlp", choices=["mlp", "resnet"])
    ap.add_argument("--sizes", default="1000,4000,16000")
    ap.add_argument("--clones", default="1,2,4,8")
    ap.add_argument("--strategies", default="ps,mirrored")
    ap.add_argument("--modes", default="placement,plan")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clone-on-cpu", action="store_true",
                    help="place clones on the CPU (default: one GPU per clone, "
                         "so that partition and all-reduce have work to do)")
    ap.add_argument("--clock", default="cpu", choices=["cpu", "wall"],
                    help="what the fits and nodes/s use: the process's user+system "
                         "CPU time and the passes' User+System column (default; "
                         "less sensitive to other load on the machine), or wall time")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None, help="write all measurements here")
    a = ap.parse_args()

    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    mdplan = os.path.join(build, "bin", "mdplan")
    if not os.access(mdplan, os.X_OK):
        sys.exit(f"planner.py: no {mdplan}; build first (scripts/setup.sh) or set BUILD")
    work = a.workdir or tempfile.mkdtemp(prefix="mdplan-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
        clones = [int(c) for c in a.clones.split(",")]
    except ValueError:
        sys.exit("planner.py: --sizes and --clones take integers, e.g. "
                 "--sizes=1000,4000")
    strategies = a.strategies.split(",")
    modes = a.modes.split(",")
    for m in modes:
        if m not in ("placement", "plan"):
            sys.exit(f"planner.py: unknown mode '{m}' (placement, plan)")
    for st in strategies:
        if st not in ("ps", "mirrored"):
            sys.exit(f"planner.py: unknown strategy '{st}' (ps, mirrored)")

    graphs = {}
    for s in sizes:
        path = os.path.join(work, f"{a.kind}{s}.mdg")
        if not os.path.exists(path):
            flag = "--layers" if a.kind == "mlp" else "--blocks"
            subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"), a.kind,
                            f"{flag}={s}", "-o", path], check=True)
        graphs[s] = path

    configs = []
    for mode in modes:
        for st in strategies:
            for c in clones:
                if st == "mirrored" and c == 1 and "ps" in strategies:
                    continue  # identical to ps with one clone
                for s in sizes:
                    configs.append((mode, st, c, s))

    def cmd(mode, st, c, s, emit_placement=False):
        x = [mdplan, graphs[s], f"--num-clones={c}", f"--strategy={st}"]
        if a.clone_on_cpu:
            x.append("--clone-on-cpu")
        if mode == "placement":
            x += [f"--passes={PLACEMENT_PIPELINE}", "--emit=placement"]
            if not emit_placement:
                x += ["-o", os.devnull]
        elif emit_placement:
            x += ["--emit=placement"]
        else:
            x += ["-o", os.path.join(work, "out.mdp")]
        return x

    # Final-graph node counts (untimed).
    nodes = {}
    for (mode, st, c, s) in configs:
        key = (mode, st, c, s)
        r = subprocess.run(cmd(mode, st, c, s, emit_placement=True), capture_output=True,
                           text=True)
        if r.returncode:
            sys.exit(f"planner.py: {' '.join(cmd(mode, st, c, s))} failed:\n{r.stderr}")
        nodes[key] = len([l for l in r.stdout.split("\n") if l])
    src_nodes = {s: nodes.get(("placement", strategies[0], 1, s)) for s in sizes}

    load = os.getloadavg()
    print(f"# mdplan planner benchmark: {a.kind}, sizes {sizes}, clones {clones}, "
          f"strategies {strategies}, {a.reps} reps interleaved")
    print(f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{os.cpu_count()} CPUs", flush=True)

    walls = {k: [] for k in configs}
    cpus = {k: [] for k in configs}
    passes = {k: [] for k in configs}
    column = -1 if a.clock == "wall" else -2
    for rep in range(a.reps):
        for key in configs:
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run(cmd(*key) + ["--time-passes"], capture_output=True, text=True)
            t = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode:
                sys.exit(f"planner.py: {' '.join(cmd(*key))} failed:\n{r.stderr}")
            walls[key].append(t)
            cpus[key].append(ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime)
            passes[key].append(parse_time_passes(r.stderr, column))
        print(f"# rep {rep + 1}/{a.reps} done, load {os.getloadavg()[0]:.2f}", flush=True)

    def med_pass(key, name):
        return statistics.median(p.get(name, 0.0) for p in passes[key])

    results = []
    print()
    print(f"# times: medians; 'time' is {a.clock} time of the whole process, 'passes' "
          f"the sum of the passes ({'User+System' if a.clock == 'cpu' else 'Wall'} column "
          f"of --time-passes); nodes/s and ns/node use 'time'")
    print(f"{'mode':9} {'strategy':8} {'clones':>6} {'size':>7} {'nodes':>9} "
          f"{'wall s':>8} {'time s':>8} {'passes s':>8} {'nodes/s':>10} {'ns/node':>8}  top passes (s)")
    T = walls if a.clock == "wall" else cpus
    for key in configs:
        mode, st, c, s = key
        wall = statistics.median(walls[key])
        w = statistics.median(T[key])
        names = sorted({n for p in passes[key] for n in p if n != "Total"})
        pt = med_pass(key, "Total")
        top = sorted(((med_pass(key, n), n) for n in names), reverse=True)[:3]
        n = nodes[key]
        print(f"{mode:9} {st:8} {c:>6} {s:>7} {n:>9} {wall:>8.3f} {w:>8.3f} {pt:>8.3f} "
              f"{n / w:>10.0f} {1e9 * w / n:>8.0f}  "
              + ", ".join(f"{nm} {t:.3f}" for t, nm in top))
        results.append({"mode": mode, "strategy": st, "clones": c, "size": s,
                        "source_nodes": src_nodes.get(s), "nodes": n,
                        "wall_s": walls[key], "cpu_s": cpus[key],
                        "wall_median_s": wall, "cpu_median_s": statistics.median(cpus[key]),
                        "passes_median_s": {nm: med_pass(key, nm) for nm in names + ["Total"]}})

    print(f"\n# growth with size ({a.clock} time): ns/node at each size, and the "
          "log-log slope of time over nodes (1.0 = linear), whole process and per pass")
    for mode in modes:
        for st in strategies:
            for c in clones:
                keys = [k for k in configs if k[:3] == (mode, st, c)]
                if len(keys) < 2:
                    continue
                ns = [nodes[k] for k in keys]
                ws = [statistics.median(T[k]) for k in keys]
                per = " ".join(f"{1e9 * w / n:.0f}" for w, n in zip(ws, ns))
                line = f"{mode:9} {st:8} clones={c}: ns/node {per}; slope {slope(ns, ws):.2f}"
                names = sorted({n for k in keys for p in passes[k] for n in p})
                sl = []
                for nm in names:
                    ts = [med_pass(k, nm) for k in keys]
                    if max(ts) >= 0.02:  # too small to fit otherwise
                        sl.append(f"{nm} {slope(ns, ts):.2f}")
                print(line + ("; passes: " + ", ".join(sl) if sl else ""))

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kind": a.kind, "clock": a.clock, "load_start": load,
                       "load_end": os.getloadavg(), "results": results}, f, indent=1)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
