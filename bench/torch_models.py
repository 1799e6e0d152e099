#!/usr/bin/env python3
"""PyTorch (CPU, eager) versions of the models mdrun is compared with, for
bench/compare.sh. Run with Debian's /usr/bin/python3 (python3-torch 1.13).

  torch_models.py mlp  [--threads=N] [--steps=S] [--warmup=W] [--log-every=K]
                       [--data=DIR | --synthetic]
  torch_models.py cnn  ...            (same options)
  torch_models.py resnet ...          (same options)
  torch_models.py tiny --ops=300 [--width=8] ...

mlp   examples/fashion_mlp.mdg: 784-256-128-100-10, ReLU, softmax
      cross-entropy (mean), L2 1e-4 * sum(w^2)/2 on the four weight
      matrices (TensorFlow's l2_regularizer / L2Loss), Adam lr 1e-3
      (beta 0.9/0.999, eps 1e-8) times 0.7 every 2814 steps, batch 64,
      Glorot-uniform weights, zero biases; the accuracy of each batch is
      computed, as mdrun's training program does.
cnn   examples/tf_tutorial_cnn.mdg: conv 5x5x32 SAME + ReLU, max-pool 2,
      conv 5x5x64 SAME + ReLU, max-pool 2, dense 1024 + ReLU, dropout 0.4,
      dense 10; softmax cross-entropy, Adam lr 1e-3, batch 100, Glorot
      weights, zero biases.
resnet examples/fashion_resnet.mdg: 3x3 conv 16 + batch norm + ReLU, three
      residual blocks (16, 32 stride 2, 64 stride 2; 1x1 projection
      shortcuts where the shape changes), each conv without bias and
      followed by batch norm (eps 1e-3, scale, moving averages with decay
      0.9), global average pooling, dense 10; L2 1e-4 * sum(w^2)/2 on
      every kernel, Adam lr 1e-3 halved every 1874 steps, batch 64, Glorot
      weights. The stride-2
      3x3 convolutions pad 1 on each side where TensorFlow's SAME pads 0
      before and 1 after: the same output size and work, shifted by one.
tiny  the chain of bench/gen_graph.py tiny: N ops cycling x+c, x*c,
      relu(x) on a [1, W] tensor, then a mean; no gradients (mdrun's
      training step of that graph has nothing trainable either).

Data: the Fashion-MNIST IDX files (pixels / 255, shuffled each epoch) or
random data of the same shape (--synthetic); the whole split is a tensor
in memory and a step takes a slice of a permutation, like mdrun's loader.

Prints one JSON object per logged interval to stdout,
{"impl":"torch","model":...,"threads":N,"step":S,"step_ms":...} (the mean
time of the K steps of the interval), and a final
{"done":true,"median_step_ms":...} over the intervals after the warm-up.
With --epochs it trains and prints the test accuracy after each epoch.
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split, data_dir):
    x = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return (torch.from_numpy(x.astype(np.float32) / 255.0),
            torch.from_numpy(y.astype(np.int64)))


def glorot(m):
    if isinstance(m, (nn.Linear, nn.Conv2d)):
        nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(m.bias)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 100)
        self.logits = nn.Linear(100, 10)
        self.apply(glorot)

    def forward(self, x):
        x = x.reshape(x.shape[0], 784)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.logits(x)

    def reg_loss(self):
        l2 = 1e-4
        return sum(l2 * 0.5 * (m.weight ** 2).sum()
                   for m in (self.fc1, self.fc2, self.fc3, self.logits))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.dense = nn.Linear(3136, 1024)
        self.dropout = nn.Dropout(0.4)
        self.logits = nn.Linear(1024, 10)
        self.apply(glorot)

    def forward(self, x):
        x = x.reshape(x.shape[0], 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = self.dropout(F.relu(self.dense(x)))
        return self.logits(x)

    def reg_loss(self):
        return None


class ConvBN(nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2,
                              bias=False)
        nn.init.xavier_uniform_(self.conv.weight)
        # TF's decay 0.9 is PyTorch's momentum 0.1.
        self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.1)

    def forward(self, x):
        return self.bn(self.conv(x))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = ConvBN(cin, cout, 3, stride)
        self.conv2 = ConvBN(cout, cout, 3, 1)
        self.shortcut = (ConvBN(cin, cout, 1, stride)
                         if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = self.conv2(F.relu(self.conv1(x)))
        s = self.shortcut(x) if self.shortcut is not None else x
        return F.relu(y + s)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ConvBN(1, 16, 3, 1)
        self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2),
                                    Block(32, 64, 2))
        self.logits = nn.Linear(64, 10)
        glorot(self.logits)

    def forward(self, x):
        x = x.reshape(x.shape[0], 1, 28, 28)
        x = self.blocks(F.relu(self.stem(x)))
        return self.logits(x.mean((2, 3)))

    def reg_loss(self):
        l2 = 1e-4
        kernels = [m.weight for m in self.modules()
                   if isinstance(m, (nn.Conv2d, nn.Linear))]
        return sum(l2 * 0.5 * (w ** 2).sum() for w in kernels)


MODELS = {"mlp": (MLP, 64), "cnn": (CNN, 100), "resnet": (ResNet, 64)}


def run_tiny(a):
    torch.manual_seed(a.seed)
    c = torch.ones(1, a.width)
    xs = torch.rand(1024, 1, a.width)
    ops = a.ops

    def step(x):
        for i in range(ops):
            k = i % 3
            if k == 0:
                x = x + c
            elif k == 1:
                x = x * c
            else:
                x = torch.relu(x)
        return x.mean().item()

    with torch.no_grad():
        times = []
        total = a.warmup + a.steps
        s = 0
        while s < total:
            t0 = time.perf_counter()
            for j in range(a.log_every):
                step(xs[(s + j) % 1024])
            dt = (time.perf_counter() - t0) / a.log_every
            s += a.log_every
            rec = {"impl": "torch", "model": f"tiny{ops}", "threads": a.threads,
                   "step": s, "step_ms": dt * 1e3}
            print(json.dumps(rec), flush=True)
            if s > a.warmup:
                times.append(dt * 1e3)
    med = statistics.median(times)
    print(json.dumps({"impl": "torch", "model": f"tiny{ops}", "threads": a.threads,
                      "done": True, "median_step_ms": med,
                      "us_per_op": med * 1e3 / (ops + 1)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=["mlp", "cnn", "resnet", "tiny"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=500, help="timed steps")
    ap.add_argument("--warmup", type=int, default=50, help="untimed first steps")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--epochs", type=float, default=0,
                    help="train this many epochs instead and report test accuracy")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--width", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.model == "tiny":
        return run_tiny(a)

    torch.manual_seed(a.seed)
    if a.synthetic:
        xtr = torch.rand(60000, 28, 28)
        ytr = torch.randint(0, 10, (60000,))
        xte, yte = xtr[:10000], ytr[:10000]
    else:
        xtr, ytr = load("train", a.data)
        xte, yte = load("t10k", a.data)
    cls, batch = MODELS[a.model]
    model = cls()
    lr0 = 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=lr0, betas=(0.9, 0.999), eps=1e-8)
    # The examples' step decay: (steps, rate).
    decay_steps, decay_rate = {"mlp": (2814, 0.7), "resnet": (1874, 0.5)}.get(
        a.model, (0, 1.0))
    per_epoch = xtr.shape[0] // batch
    total = int(a.epochs * per_epoch) if a.epochs > 0 else a.warmup + a.steps
    log_every = per_epoch if a.epochs > 0 else a.log_every

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, xte.shape[0], 1000):
                correct += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        model.train()
        return correct / xte.shape[0]

    model.train()
    perm = torch.randperm(xtr.shape[0])
    pos = 0
    times = []
    t0 = time.perf_counter()
    for step in range(total):
        if pos + batch > xtr.shape[0]:
            perm = torch.randperm(xtr.shape[0])
            pos = 0
        idx = perm[pos:pos + batch]
        pos += batch
        x, y = xtr[idx], ytr[idx]
        if decay_steps and step % decay_steps == 0:
            for g in opt.param_groups:
                g["lr"] = lr0 * decay_rate ** (step // decay_steps)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        reg = model.reg_loss()
        total_loss = loss + reg if reg is not None else loss
        opt.zero_grad(set_to_none=True)
        total_loss.backward()
        opt.step()
        acc = (logits.detach().argmax(1) == y).float().mean()
        lv = total_loss.item()
        acc.item()
        if (step + 1) % log_every == 0:
            dt = (time.perf_counter() - t0) / log_every
            rec = {"impl": "torch", "model": a.model, "threads": a.threads,
                   "step": step + 1, "step_ms": dt * 1e3, "loss": lv}
            if a.epochs > 0:
                rec["test_accuracy"] = evaluate()
            print(json.dumps(rec), flush=True)
            if step + 1 > a.warmup:
                times.append(dt * 1e3)
            t0 = time.perf_counter()
    med = statistics.median(times) if times else float("nan")
    print(json.dumps({"impl": "torch", "model": a.model, "threads": a.threads,
                      "done": True, "median_step_ms": med}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
