#!/usr/bin/env python3
"""How far apart two correct runs of the same plan drift when only the
order of the sums changes: mdrun's CPU kernel backends (MDRT_CPU_KERNELS:
oneDNN, OpenBLAS, the plain loops) on the same plan, data, seed and
thread count, over the first steps of training.

The GPU checks compare the GPU's losses with the CPU's (docs/Cuda.md); this
gives the yardstick: what the CPU's own backends, each correct to rounding,
do to each other over the same steps. Prints, per model and seed, the
largest relative difference of the per-step losses over the steps and the
first step whose difference passes --tol.

  bench/loss_drift.py [--models=mlp,cnn,resnet] [--seeds=1,2,3,4,5]
                      [--steps=20] [--threads=1] [--tol=1e-4]
                      [--backends=auto,openblas,reference]

The plans are the ones the GPU checks use (tools/gpu/pack.sh): one clone
planned for one GPU, run with --soft-placement on the CPU. Data:
Fashion-MNIST in order (--data, default the directory scripts/train.sh
uses). BUILD defaults to $BUILD or build/.
"""
import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {
    "mlp": "examples/fashion_mlp.mdg",
    "cnn": "examples/tf_tutorial_cnn.mdg",
    "resnet": "examples/fashion_resnet.mdg",
}


def losses(text):
    out = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 4 and p[0] == "step" and p[2] == "loss":
            out[int(p[1])] = float(p[3])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--models", default="mlp,cnn,resnet")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--backends", default="auto,openblas,reference")
    a = ap.parse_args()
    bin_dir = os.path.join(a.build, "bin")
    mdplan, mdrun = (os.path.join(bin_dir, t) for t in ("mdplan", "mdrun"))
    for tool in (mdplan, mdrun):
        if not os.access(tool, os.X_OK):
            sys.exit("loss_drift: %s not found (build first, or set BUILD)"
                     % tool)
    if not os.path.isdir(a.data):
        sys.exit("loss_drift: no dataset at %s (--data)" % a.data)
    backends = a.backends.split(",")
    for b in backends:
        if b not in ("auto", "openblas", "reference"):
            sys.exit("loss_drift: unknown backend '%s' (auto, openblas, "
                     "reference)" % b)
    if len(backends) < 2:
        sys.exit("loss_drift: --backends needs two or more to compare")
    tmp = tempfile.mkdtemp(prefix="loss-drift-")
    try:
        run(a, mdplan, mdrun, backends, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a, mdplan, mdrun, backends, tmp):
    print("| model | seed | backends | largest difference | first step past %g |"
          % a.tol)
    print("| --- | ---: | --- | ---: | ---: |")
    for model in a.models.split(","):
        if model not in MODELS:
            sys.exit("loss_drift: unknown model '%s' (mlp, cnn, resnet)"
                     % model)
        plan = os.path.join(tmp, model + ".mdp")
        subprocess.run([mdplan, os.path.join(ROOT, MODELS[model]),
                        "--num-clones=1", "-o", plan], check=True)
        for seed in a.seeds.split(","):
            runs = {}
            for b in backends:
                cmd = [mdrun, plan, "--soft-placement", "--data=" + a.data,
                       "--steps=%d" % a.steps, "--no-shuffle", "--no-eval",
                       "--print-losses", "--log-every=0", "--no-progress",
                       "--threads=%d" % a.threads, "--seed=" + seed]
                env = dict(os.environ, MDRT_CPU_KERNELS=b,
                           CUDA_VISIBLE_DEVICES="")
                out = subprocess.run(cmd, capture_output=True, text=True,
                                     env=env)
                if out.returncode != 0:
                    sys.exit("loss_drift: %s failed:\n%s"
                             % (" ".join(cmd), out.stderr))
                runs[b] = losses(out.stdout)
                if not runs[b]:
                    sys.exit("loss_drift: no losses in the output of %s"
                             % " ".join(cmd))
            for x, y in itertools.combinations(backends, 2):
                if sorted(runs[x]) != sorted(runs[y]):
                    sys.exit("loss_drift: %s and %s printed other steps"
                             % (x, y))
                rel = [abs(runs[x][s] - runs[y][s]) / abs(runs[x][s])
                       for s in sorted(runs[x])]
                first = next((i + 1 for i, r in enumerate(rel) if r > a.tol),
                             None)
                print("| %s | %s | %s / %s | %.1e | %s |"
                      % (model, seed, x, y, max(rel),
                         first if first else "none"))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
