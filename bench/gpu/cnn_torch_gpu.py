#!/usr/bin/env python3
"""Per-step time of the TF-tutorial CNN (or, with --model resnet, the
ResNet example) on one GPU, side by side in one run:
mdrun (eager and --cuda-graph; --cuda-graph also with MDRT_CUDNN_FIND=1
and with MDRT_CUDA_CONV_GEMM=1) against
PyTorch eager and PyTorch with torch.cuda.graphs, same model, batch,
optimizer and data.

The model is examples/tf_tutorial_cnn.mdg: conv 5x5x32 SAME + ReLU, max-pool
2, conv 5x5x64 SAME + ReLU, max-pool 2, dense 1024 + ReLU, dropout 0.4,
dense 10; softmax cross-entropy; Adam(1e-3); batch 100; Fashion-MNIST in
order. float32, no TF32 on either side (mdrun uses FMA math in cuBLAS and
cuDNN; torch is told the same).

  bench/gpu/cnn_torch_gpu.py --mdrun build-gpu/bin/mdrun \
      --plan shared/gpu-carry/plans/cnn.mdp --data DIR [--steps 300]

mdrun's time per step comes from its own wall clock over the steps after
a warm-up run of the same length subtracted out (two runs of W and W+S
steps: (t(W+S) - t(W)) / S, so start-up, data loading and the first steps
do not count). PyTorch's is measured with CUDA events around S steps after
W warm-up steps. Prints one line per variant and the ratios.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# The models and the IDX reader of the CPU comparison (bench/torch_models.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_models  # noqa: E402


def make_model(name):
    """bench/torch_models.py's model (the one the CPU comparison uses) and
    whether it has a regularization loss (the ResNet's L2 on every kernel)."""
    model = {"cnn": torch_models.CNN, "resnet": torch_models.ResNet}[name]()
    return model, model.reg_loss() is not None


def torch_step_ms(model_name, images, labels, batch, warmup, steps, graphs,
                  device="cuda"):
    dev = torch.device(device)
    torch.manual_seed(1)
    model, has_reg = make_model(model_name)
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3,
                           capturable=graphs)
    n = images.shape[0] // batch
    xs = torch.from_numpy(images[:n * batch].astype(np.float32) / 255.0)
    xs = xs.reshape(n, batch, 1, 28, 28).to(dev)
    ys = torch.from_numpy(labels[:n * batch].astype(np.int64))
    ys = ys.reshape(n, batch).to(dev)
    sx = torch.empty_like(xs[0])
    sy = torch.empty_like(ys[0])

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(sx), sy)
        if has_reg:
            loss = loss + model.reg_loss()
        loss.backward()
        opt.step()
        return loss

    if graphs:
        # Warm up on a side stream, then capture one whole step.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                sx.copy_(xs[i % n])
                sy.copy_(ys[i % n])
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = step()

        def run(i):
            sx.copy_(xs[i % n])
            sy.copy_(ys[i % n])
            g.replay()
    else:
        def run(i):
            sx.copy_(xs[i % n])
            sy.copy_(ys[i % n])
            step()

    for i in range(warmup):
        run(i)
    if device != "cuda":  # a smoke test of the script on a CPU
        t = time.perf_counter()
        for i in range(steps):
            run(warmup + i)
        return 1000.0 * (time.perf_counter() - t) / steps
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(steps):
        run(warmup + i)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / steps


def mdrun_seconds(mdrun, plan, data, steps, extra, env):
    cmd = [mdrun, plan, "--data=" + data, "--steps=%d" % steps,
           "--no-shuffle", "--no-eval", "--log-every=0", "--no-progress"]
    cmd += extra
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True,
                         env=dict(os.environ, **env))
    wall = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit("mdrun failed: %s\n%s" % (" ".join(cmd), out.stderr))
    m = re.search(r"done: \d+ steps? in ([0-9.e+-]+) s", out.stdout)
    return (float(m.group(1)) if m else wall), out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mdrun", required=True)
    ap.add_argument("--model", choices=("cnn", "resnet"), default="cnn")
    ap.add_argument("--plan", required=True,
                    help="the model planned for one GPU, --strategy=mirrored")
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int,
                    help="the plan's batch (cnn 100, resnet 64)")
    ap.add_argument("--device", default="cuda",
                    help="cpu: a smoke test of this script (no CUDA graphs)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--only", choices=("torch-eager", "torch-graph"),
                    help="run one PyTorch variant alone (for a profiler)")
    a = ap.parse_args()
    if a.batch is None:
        a.batch = {"cnn": 100, "resnet": 64}[a.model]
    gpu = a.device == "cuda"

    # Same precision on both sides: no TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True

    images = torch_models.read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
    labels = torch_models.read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))

    def torch_ms(graphs):
        return torch_step_ms(a.model, images, labels, a.batch, a.warmup,
                             a.steps, graphs, a.device)

    if a.only:
        ms = torch_ms(a.only == "torch-graph")
        print("%s: %.3f ms/step" % (a.only, ms))
        return

    rows = []
    # MDRT_CUDNN_FIND=1: cuDNN algorithms chosen by timing them (not yet
    # mdrun's default; these rows decide whether it should be).
    # MDRT_CUDA_CONV_GEMM=1: every convolution as im2col and cuBLAS.
    # MDRT_SPIN_WAIT=1: the executor's threads poll for each other before
    # they sleep (off by default: it loses on a machine whose cores are
    # busy with other work; the GPU machine's are not).
    find = {"MDRT_CUDNN_FIND": "1"}
    gemm = {"MDRT_CUDA_CONV_GEMM": "1"}
    spin = {"MDRT_SPIN_WAIT": "1"}
    variants = (("mdrun", [], {}),
                ("mdrun --cuda-graph", ["--cuda-graph"], {}),
                ("mdrun --cuda-graph, timed", ["--cuda-graph"], find),
                ("mdrun --cuda-graph, im2col", ["--cuda-graph"], gemm),
                ("mdrun --cuda-graph, polling", ["--cuda-graph"], spin))
    for name, extra, env in variants:
        t0, _ = mdrun_seconds(a.mdrun, a.plan, a.data, a.warmup, extra, env)
        t1, log = mdrun_seconds(a.mdrun, a.plan, a.data, a.warmup + a.steps,
                                extra, env)
        rows.append((name, 1000.0 * (t1 - t0) / a.steps))
        for line in log.splitlines():
            if line.startswith("note: cuda graph"):
                print(line)
    rows.append(("torch eager", torch_ms(False)))
    if gpu:
        rows.append(("torch cuda graph", torch_ms(True)))

    print("%s, batch %d, %d steps after %d warm-up, %s, torch %s" % (
        a.model.upper() if a.model == "cnn" else "ResNet", a.batch, a.steps,
        a.warmup, torch.cuda.get_device_name(0) if gpu else a.device,
        torch.__version__))
    for name, ms in rows:
        print("  %-27s %8.3f ms/step" % (name, ms))
    base = dict(rows)
    for m, _, _ in variants:
        for t in ("torch eager", "torch cuda graph"):
            if t in base:
                print("  %-27s / %-18s %.2fx" % (m, t, base[m] / base[t]))


if __name__ == "__main__":
    main()
