"""An independent implementation of the example models' training steps in
NumPy (forward, hand-written backward, optimizer), to check mdrun's
against: it starts from the variables and Adam slots of an mdrun
checkpoint (as `mdrun --print-checkpoint` prints it) and runs the next
steps on the same batches, printing each step's loss as
`mdrun --print-losses` does (`step N loss X`).

  numpy_reference.py mlp|cnn CHECKPOINT.txt DATA_DIR --steps=N --batch=B
      [--learning-rate=LR] [--decay-steps=S --decay-rate=R] [--l2=SCALE]
      [--clip-norm=C]

The models are examples/fashion_mlp.mdg and examples/tf_tutorial_cnn.mdg
(the CNN without its dropout, whose masks are mdrun's random draws),
written here from what the model files say, not from mdrun's code, with
TensorFlow's conventions: NHWC images, HWIO filters, SAME padding, a
Reshape of NHWC flattening row-major, softmax cross-entropy averaged over
the batch, L2 regularization SCALE * sum(w^2) / 2 of the MLP's weight
matrices added to the loss, and TensorFlow's Adam (bias correction in the
step size, epsilon added to sqrt(v)) with a staircase exponential decay of
the learning rate by the global step before the update.

Everything is float64: with mdrun's model in float64 too, the two
implementations' losses differ only by rounding (around 1e-15 over a few
steps), and any difference of meaning (a gradient, a scale, an update)
shows orders of magnitude above it.

The data: Fashion-MNIST's training split in file order (mdrun's
--no-shuffle), pixels / 255; step K takes examples (K - 1) * B to K * B - 1.
"""
import argparse
import gzip
import os
import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8,
                         offset=4 + 4 * ndim).reshape(dims)


def read_checkpoint(path):
    """The global step and the tensors (float64) of a printed checkpoint."""
    step, tensors = None, {}
    for line in open(path):
        if line.startswith("step "):
            step = int(line.split()[1])
        elif line.startswith("tensor "):
            head, _, values = line.partition(" = ")
            _, name, desc = head.split()
            shape = [int(d) for d in
                     desc[desc.index("[") + 1:-1].split(",") if d]
            tensors[name] = np.array([float(v) for v in values.split()],
                                     dtype=np.float64).reshape(shape)
    if step is None or not tensors:
        sys.exit("numpy_reference: no step or no tensors in " + path)
    return step, tensors


def xent(logits, labels):
    """Mean softmax cross-entropy and its gradient with respect to logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    n = len(labels)
    loss = (np.log(s[:, 0]) - z[np.arange(n), labels]).mean()
    grad = e / s
    grad[np.arange(n), labels] -= 1
    return loss, grad / n


def dense(h, w, b):
    return h @ w + b


def dense_back(h, w, dy):
    """Gradients of h @ w + b: (dh, dw, db)."""
    return dy @ w.T, h.T @ dy, dy.sum(axis=0)


def mlp_step(v, x, y):
    """Loss (without regularization) and gradients of the MLP."""
    layers = ["fc1", "fc2", "fc3", "logits"]
    hs, zs = [x.reshape(len(x), 784)], []
    for i, l in enumerate(layers):
        z = dense(hs[-1], v["mlp/%s/weights" % l], v["mlp/%s/biases" % l])
        zs.append(z)
        if i < 3:
            hs.append(np.maximum(z, 0))
    loss, dz = xent(zs[-1], y)
    g = {}
    for i in reversed(range(4)):
        l = layers[i]
        dh, g["mlp/%s/weights" % l], g["mlp/%s/biases" % l] = dense_back(
            hs[i], v["mlp/%s/weights" % l], dz)
        if i:
            dz = dh * (zs[i - 1] > 0)
    return loss, g


def mlp_regularized():
    return ["mlp/%s/weights" % l for l in ("fc1", "fc2", "fc3", "logits")]


def conv_same(x, k):
    """TensorFlow's Conv2D, SAME, stride 1, odd square window: NHWC x, HWIO
    k. Returns the output and the window columns (for the gradients)."""
    n, hgt, wid, c = x.shape
    kk = k.shape[0]
    p = kk // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    # [N, H, W, C, kh, kw] -> [N, H, W, kh, kw, C]: HWIO's order.
    cols = sliding_window_view(xp, (kk, kk), axis=(1, 2))
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * hgt * wid, -1)
    out = cols @ k.reshape(-1, k.shape[3])
    return out.reshape(n, hgt, wid, -1), cols


def conv_same_back(x_shape, cols, k, dy, need_dx):
    """Gradients of conv_same: (dx or None, dk)."""
    n, hgt, wid, c = x_shape
    kk = k.shape[0]
    p = kk // 2
    dy2 = dy.reshape(-1, dy.shape[3])
    dk = (cols.T @ dy2).reshape(k.shape)
    if not need_dx:
        return None, dk
    dcols = (dy2 @ k.reshape(-1, k.shape[3]).T).reshape(
        n, hgt, wid, kk, kk, c)
    dxp = np.zeros((n, hgt + 2 * p, wid + 2 * p, c))
    for i in range(kk):
        for j in range(kk):
            dxp[:, i:i + hgt, j:j + wid, :] += dcols[:, :, :, i, j, :]
    return dxp[:, p:p + hgt, p:p + wid, :], dk


def pool2(x):
    """2x2 max pooling, stride 2, on even sizes; the output and, per
    window, the index of its maximum (the first of equal values)."""
    n, hgt, wid, c = x.shape
    w = x.reshape(n, hgt // 2, 2, wid // 2, 2, c).transpose(0, 1, 3, 5, 2, 4)
    w = w.reshape(n, hgt // 2, wid // 2, c, 4)
    arg = w.argmax(axis=4)
    return np.take_along_axis(w, arg[..., None], axis=4)[..., 0], arg


def pool2_back(x_shape, arg, dy):
    n, hgt, wid, c = x_shape
    dw = np.zeros(arg.shape + (4,))
    np.put_along_axis(dw, arg[..., None], dy[..., None], axis=4)
    dw = dw.reshape(n, hgt // 2, wid // 2, c, 2, 2).transpose(0, 1, 4, 2, 5, 3)
    return dw.reshape(x_shape)


def cnn_step(v, x, y):
    """Loss and gradients of the CNN without dropout."""
    n = len(x)
    h0 = x.reshape(n, 28, 28, 1)
    z1, cols1 = conv_same(h0, v["cnn/conv1/kernel"])
    z1 = z1 + v["cnn/conv1/bias"]
    p1, arg1 = pool2(np.maximum(z1, 0))
    z2, cols2 = conv_same(p1, v["cnn/conv2/kernel"])
    z2 = z2 + v["cnn/conv2/bias"]
    p2, arg2 = pool2(np.maximum(z2, 0))
    f = p2.reshape(n, 3136)
    z3 = dense(f, v["cnn/dense/kernel"], v["cnn/dense/bias"])
    h3 = np.maximum(z3, 0)
    logits = dense(h3, v["cnn/logits/kernel"], v["cnn/logits/bias"])
    loss, dl = xent(logits, y)
    g = {}
    dh3, g["cnn/logits/kernel"], g["cnn/logits/bias"] = dense_back(
        h3, v["cnn/logits/kernel"], dl)
    df, g["cnn/dense/kernel"], g["cnn/dense/bias"] = dense_back(
        f, v["cnn/dense/kernel"], dh3 * (z3 > 0))
    dz2 = pool2_back(z2.shape, arg2, df.reshape(p2.shape)) * (z2 > 0)
    g["cnn/conv2/bias"] = dz2.sum(axis=(0, 1, 2))
    dp1, g["cnn/conv2/kernel"] = conv_same_back(
        p1.shape, cols2, v["cnn/conv2/kernel"], dz2, True)
    dz1 = pool2_back(z1.shape, arg1, dp1) * (z1 > 0)
    g["cnn/conv1/bias"] = dz1.sum(axis=(0, 1, 2))
    _, g["cnn/conv1/kernel"] = conv_same_back(
        h0.shape, cols1, v["cnn/conv1/kernel"], dz1, False)
    return loss, g


MODELS = {"mlp": (mlp_step, mlp_regularized), "cnn": (cnn_step, list)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, required=True,
                    help="the global step to stop after")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--decay-steps", type=int, default=0)
    ap.add_argument("--decay-rate", type=float, default=1.0)
    ap.add_argument("--l2", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--epsilon", type=float, default=1e-8)
    args = ap.parse_args()

    step_fn, regularized = MODELS[args.model]
    step, t = read_checkpoint(args.checkpoint)
    names = [k for k in t
             if k != "global_step" and not k.endswith(("/Adam", "/Adam_1"))]
    missing = [k + s for k in names for s in ("/Adam", "/Adam_1")
               if k + s not in t]
    if missing:
        sys.exit("numpy_reference: no Adam slot %s in %s" % (
            missing[0], args.checkpoint))
    v = {k: t[k] for k in names}
    m = {k: t[k + "/Adam"] for k in names}
    s = {k: t[k + "/Adam_1"] for k in names}

    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"))
    b1, b2 = args.beta1, args.beta2
    while step < args.steps:
        lo = step * args.batch
        x = images[lo:lo + args.batch].astype(np.float64) / 255.0
        y = labels[lo:lo + args.batch].astype(np.int64)
        loss, g = step_fn(v, x, y)
        for k in regularized():
            loss += args.l2 * (v[k] ** 2).sum() / 2
            g[k] = g[k] + args.l2 * v[k]
        lr = args.learning_rate
        if args.decay_steps > 0:
            lr *= args.decay_rate ** (step // args.decay_steps)
        step += 1
        print("step %d loss %.17g" % (step, loss))
        alpha = lr * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
        for k in names:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            s[k] = b2 * s[k] + (1 - b2) * g[k] * g[k]
            v[k] = v[k] - alpha * m[k] / (np.sqrt(s[k]) + args.epsilon)


if __name__ == "__main__":
    main()
