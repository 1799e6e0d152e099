"""An independent implementation of the example models' training steps in
NumPy (forward, hand-written backward, optimizer), to check mdrun's
against: it starts from the variables and optimizer slots of an mdrun
checkpoint (as `mdrun --print-checkpoint` prints it) and runs the next
steps on the same batches, printing each step's loss as
`mdrun --print-losses` does (`step N loss X`).

  numpy_reference.py mlp|cnn|resnet CHECKPOINT.txt DATA_DIR --steps=N
      --batch=B [--clones=N] [--optimizer=sgd|momentum|adam|rmsprop|adagrad]
      [--learning-rate=LR]
      [--decay-steps=S --decay-rate=R [--smooth-decay]]
      [--decay-steps=S --polynomial-decay --end-learning-rate=E --power=P]
      [--momentum=M] [--nesterov]
      [--rho=RHO] [--centered] [--epsilon=EPS] [--initial-accumulator-value=V]
      [--clip-gradient-norm=C | --clip-global-norm=C]
      [--l2=SCALE] [--dropout-rate=R] [--check-initial] [--evaluate]
      [--final=FILE]

The models are examples/fashion_mlp.mdg, examples/tf_tutorial_cnn.mdg
(any width of its dense layer; its dropout masks drawn as docs/Ops.md
says, class Dropout) and examples/fashion_resnet.mdg, written here from
what the model files and docs/Ops.md say, not from mdrun's code, with
TensorFlow's conventions: NHWC images, HWIO filters, SAME padding (the
extra row and column after), a Reshape of NHWC flattening row-major,
softmax cross-entropy averaged over the batch, batch normalization with
the batch's mean and biased variance and moving averages, L2
regularization SCALE * sum(w^2) / 2 of the weight matrices and filters
added to the loss, and TensorFlow's optimizers (class Optimizer).

Everything is float64: with mdrun's model in float64 too, the two
implementations differ only by rounding (around 1e-15 over a few steps),
and any difference of meaning (a gradient, a scale, an update) shows
orders of magnitude above it.

The data: Fashion-MNIST's training split in file order (mdrun's
--no-shuffle), pixels / 255; step K takes examples (K - 1) * B to K * B - 1.
"""
import argparse
import gzip
import os
import re
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
    """The global step, the run seed and the tensors (float64) of a printed
    checkpoint."""
    step, seed, tensors = None, None, {}
    for line in open(path):
        if line.startswith("step "):
            step = int(line.split()[1])
        elif line.startswith("seed "):
            seed = int(line.split()[1])
        elif line.startswith("tensor "):
            head, _, values = line.partition(" = ")
            _, name, desc = head.split()
            shape = [int(d) for d in
                     desc[desc.index("[") + 1:-1].split(",") if d]
            tensors[name] = np.array(values.split(),
                                     dtype=np.float64).reshape(shape)
    if step is None or seed is None or not tensors:
        sys.exit("numpy_reference: no step, seed or tensors in " + path)
    return step, seed, tensors


MASK64 = (1 << 64) - 1


def mix_bits(z):
    """splitmix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z + np.uint64(0x9e3779b97f4a7c15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def fnv1a(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001b3) & MASK64
    return h


class Dropout:
    """Dropout as docs/Ops.md defines its masks: element i of the node named
    NAME at global step S (the step's number less one) is kept when
    uniformRandomFloat(run seed ^ the node's seed, FNV-1a(NAME), S, i) >=
    rate, that is when the top 24 of splitmix64's nested draw's bits, over
    2^24, reach the least float32 not below the rate; a kept element is
    scaled by 1 / (1 - rate)."""

    def __init__(self, run_seed, rate, node_seed=0):
        self.seed = np.uint64((run_seed ^ node_seed) & MASK64)
        self.rate = rate
        t = np.float32(rate)
        if float(t) < rate:
            t = np.nextafter(t, np.float32(np.inf))
        self.threshold = float(t)

    def mask(self, name, step, shape):
        e = np.arange(int(np.prod(shape)), dtype=np.uint64)
        bits = mix_bits(self.seed ^ mix_bits(
            np.uint64(fnv1a(name)) ^ mix_bits(np.uint64(step) ^ mix_bits(e))))
        u = (bits >> np.uint64(40)).astype(np.float64) / 16777216.0
        keep = (u >= self.threshold).reshape(shape)
        return np.where(keep, 1.0 / (1.0 - self.rate), 0.0)


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


def mlp_forward(v, x, train, ctx=None):
    """The MLP's logits and the function from their gradient to the
    variables' (the same in training and evaluation)."""
    layers = ["fc1", "fc2", "fc3", "logits"]
    hs, zs = [x.reshape(len(x), 784)], []
    for i, l in enumerate(layers):
        z = dense(hs[-1], v["mlp/%s/weights" % l], v["mlp/%s/biases" % l])
        zs.append(z)
        if i < 3:
            hs.append(np.maximum(z, 0))

    def back(dz):
        g = {}
        for i in reversed(range(4)):
            l = layers[i]
            dh, g["mlp/%s/weights" % l], g["mlp/%s/biases" % l] = dense_back(
                hs[i], v["mlp/%s/weights" % l], dz)
            if i:
                dz = dh * (zs[i - 1] > 0)
        return g

    return zs[-1], back


def mlp_regularized(v):
    return ["mlp/%s/weights" % l for l in ("fc1", "fc2", "fc3", "logits")]


def same_padding(size, k, stride):
    """TensorFlow's SAME: (outputs, padding before, padding after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def conv(x, k, stride=1):
    """TensorFlow's Conv2D with SAME padding: NHWC x, HWIO k. Returns the
    output and what the gradients need."""
    n, hgt, wid, c = x.shape
    kk = k.shape[0]
    oh, pb, pa = same_padding(hgt, kk, stride)
    ow, qb, qa = same_padding(wid, kk, stride)
    xp = np.pad(x, ((0, 0), (pb, pa), (qb, qa), (0, 0)))
    # [N, OH, OW, C, kh, kw] -> [N, OH, OW, kh, kw, C]: HWIO's order.
    cols = sliding_window_view(xp, (kk, kk), axis=(1, 2))[
        :, ::stride, ::stride][:, :oh, :ow]
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1)
    out = (cols @ k.reshape(-1, k.shape[3])).reshape(n, oh, ow, -1)
    return out, (x.shape, xp.shape, (pb, qb), stride, cols)


def conv_back(saved, k, dy, need_dx=True):
    """Gradients of conv: (dx or None, dk)."""
    x_shape, xp_shape, (pb, qb), stride, cols = saved
    n, hgt, wid, c = x_shape
    kk = k.shape[0]
    _, oh, ow, co = dy.shape
    dy2 = dy.reshape(-1, co)
    dk = (cols.T @ dy2).reshape(k.shape)
    if not need_dx:
        return None, dk
    dcols = (dy2 @ k.reshape(-1, co).T).reshape(n, oh, ow, kk, kk, c)
    dxp = np.zeros(xp_shape)
    for i in range(kk):
        for j in range(kk):
            dxp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] += \
                dcols[:, :, :, i, j, :]
    return dxp[:, pb:pb + hgt, qb:qb + wid, :], dk


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


def cnn_forward(v, x, train, ctx=None):
    """The CNN's logits and their backward function; in training, the
    dropout of ctx (a Dropout, the clone's name scope and the step)."""
    n = len(x)
    h0 = x.reshape(n, 28, 28, 1)
    z1, saved1 = conv(h0, v["cnn/conv1/kernel"])
    z1 = z1 + v["cnn/conv1/bias"]
    p1, arg1 = pool2(np.maximum(z1, 0))
    z2, saved2 = conv(p1, v["cnn/conv2/kernel"])
    z2 = z2 + v["cnn/conv2/bias"]
    p2, arg2 = pool2(np.maximum(z2, 0))
    f = p2.reshape(n, -1)
    z3 = dense(f, v["cnn/dense/kernel"], v["cnn/dense/bias"])
    h3 = np.maximum(z3, 0)
    m = 1.0
    if train:
        m = ctx["dropout"].mask(ctx["scope"] + "cnn/dropout", ctx["step"],
                                h3.shape)
    d3 = h3 * m

    def back(dl):
        g = {}
        dd3, g["cnn/logits/kernel"], g["cnn/logits/bias"] = dense_back(
            d3, v["cnn/logits/kernel"], dl)
        df, g["cnn/dense/kernel"], g["cnn/dense/bias"] = dense_back(
            f, v["cnn/dense/kernel"], dd3 * m * (z3 > 0))
        dz2 = pool2_back(z2.shape, arg2, df.reshape(p2.shape)) * (z2 > 0)
        g["cnn/conv2/bias"] = dz2.sum(axis=(0, 1, 2))
        dp1, g["cnn/conv2/kernel"] = conv_back(saved2, v["cnn/conv2/kernel"],
                                               dz2)
        dz1 = pool2_back(z1.shape, arg1, dp1) * (z1 > 0)
        g["cnn/conv1/bias"] = dz1.sum(axis=(0, 1, 2))
        _, g["cnn/conv1/kernel"] = conv_back(saved1, v["cnn/conv1/kernel"],
                                             dz1, need_dx=False)
        return g

    return dense(d3, v["cnn/logits/kernel"], v["cnn/logits/bias"]), back


def cnn_regularized(v):
    return []


BN_EPSILON, BN_DECAY = 1e-3, 0.9


def conv_bn(v, prefix, x, stride, train):
    """Conv2D (SAME) then batch normalization with scale over N, H and W:
    in training with the batch's mean and biased variance, the moving
    averages in v moving towards them by 1 - decay; in evaluation with the
    moving averages. Returns y and its backward function (training), which
    takes dy, adds to the gradients g and returns dx."""
    z, saved = conv(x, v[prefix + "/kernel"], stride)
    bn = prefix + "/BatchNorm/"
    if train:
        mean = z.mean(axis=(0, 1, 2))
        var = ((z - mean) ** 2).mean(axis=(0, 1, 2))
        for name, batch in (("moving_mean", mean), ("moving_variance", var)):
            old = v[bn + name]
            v[bn + name] = old - (old - batch) * (1 - BN_DECAY)
    else:
        mean, var = v[bn + "moving_mean"], v[bn + "moving_variance"]
    inv = 1 / np.sqrt(var + BN_EPSILON)
    xhat = (z - mean) * inv
    gamma = v[bn + "gamma"]

    def back(dy, g, need_dx=True):
        g[bn + "beta"] = dy.sum(axis=(0, 1, 2))
        g[bn + "gamma"] = (dy * xhat).sum(axis=(0, 1, 2))
        dxhat = dy * gamma
        dz = inv * (dxhat - dxhat.mean(axis=(0, 1, 2)) -
                    xhat * (dxhat * xhat).mean(axis=(0, 1, 2)))
        dx, g[prefix + "/kernel"] = conv_back(saved, v[prefix + "/kernel"],
                                              dz, need_dx)
        return dx

    return xhat * gamma + v[bn + "beta"], back


def resnet_forward(v, x, train, ctx=None):
    """The residual network's logits and their backward function."""
    n = len(x)

    def cbn(prefix, h, stride=1):
        return conv_bn(v, "resnet/" + prefix, h, stride, train)

    a, stem_back = cbn("stem", x.reshape(n, 28, 28, 1))
    a = np.maximum(a, 0)
    stem_mask = a > 0
    blocks = []
    for name, stride in (("block1", 1), ("block2", 2), ("block3", 2)):
        c1, b1 = cbn(name + "/conv1", a, stride)
        m1 = c1 > 0
        c2, b2 = cbn(name + "/conv2", np.maximum(c1, 0), 1)
        if stride == 1:
            sc, bs = a, None
        else:
            sc, bs = cbn(name + "/shortcut", a, stride)
        s = c2 + sc
        blocks.append((b1, m1, b2, bs, s > 0))
        a = np.maximum(s, 0)
    pooled = a.mean(axis=(1, 2))

    def back(dl):
        g = {}
        dp, g["resnet/logits/kernel"], g["resnet/logits/bias"] = dense_back(
            pooled, v["resnet/logits/kernel"], dl)
        da = np.broadcast_to(dp[:, None, None, :] / (a.shape[1] * a.shape[2]),
                             a.shape)
        for b1, m1, b2, bs, mask in reversed(blocks):
            ds = da * mask
            da_main = b1(b2(ds, g) * m1, g)
            da = da_main + (ds if bs is None else bs(ds, g))
        stem_back(da * stem_mask, g, need_dx=False)
        return g

    return dense(pooled, v["resnet/logits/kernel"],
                 v["resnet/logits/bias"]), back


def resnet_regularized(v):
    return [k for k in v if k.endswith("/kernel")]


MODELS = {
    "mlp": (mlp_forward, mlp_regularized),
    "cnn": (cnn_forward, cnn_regularized),
    "resnet": (resnet_forward, resnet_regularized),
}


def write_checkpoint(path, step, tensors):
    """The tensors as `mdrun --print-checkpoint` prints them (for
    tools/gpu/diff_checkpoints.py)."""
    with open(path, "w") as f:
        f.write("step %d\n" % step)
        f.write("tensor global_step int64[] = %d\n" % step)
        for name in sorted(tensors):
            t = tensors[name]
            f.write("tensor %s float64[%s] =%s\n" % (
                name, ",".join(map(str, t.shape)),
                "".join(" %.17g" % e for e in t.ravel())))


class Optimizer:
    """TensorFlow's updates, with their slots (named as mdrun's checkpoints
    name them): gradient descent; momentum (accum = momentum * accum + g,
    then var -= lr * accum, or with Nesterov var -= lr * (g + momentum *
    accum)); Adam (m and v, the bias correction in the step size, epsilon
    added to sqrt(v)); RMSProp without centering (a mean square ms that
    starts at one, ms += (g^2 - ms) * (1 - rho); a momentum slot, mom =
    momentum * mom + lr * g / sqrt(ms + epsilon); var -= mom; centered, a
    mean gradient mg += (g - mg) * (1 - rho) between them, its slot after
    ms's, and ms - mg^2 for ms under the root); Adagrad (an
    accumulator that starts at initial_accumulator_value, acc += g^2; var
    -= lr * g / sqrt(acc)). The learning
    rate decays in a staircase by the global step before the update.
    Unset, momentum and epsilon take TensorFlow's defaults of the
    optimizer: 0.9 (mdplan's, for momentum) and 1e-8 for Adam, 0 and
    1e-10 for RMSProp."""

    SLOTS = {"sgd": [], "momentum": ["Momentum"], "adam": ["Adam", "Adam_1"],
             "rmsprop": ["RMSProp", "RMSProp_1"], "adagrad": ["Adagrad"]}
    # The slots that start at one, and those that start at
    # initial_accumulator_value (the others at zero).
    ONES = {"RMSProp"}
    INITIAL_ACCUMULATOR = {"Adagrad"}

    def __init__(self, args):
        self.a = args
        self.slots = self.SLOTS[args.optimizer]
        rms = args.optimizer == "rmsprop"
        if rms and args.centered:
            self.slots = ["RMSProp", "RMSProp_1", "RMSProp_2"]
        if args.momentum is None:
            args.momentum = 0.0 if rms else 0.9
        if args.epsilon is None:
            args.epsilon = 1e-10 if rms else 1e-8

    def rate(self, step):
        """tf.train.exponential_decay (staircase unless --smooth-decay) or
        tf.train.polynomial_decay (--polynomial-decay, without cycles)."""
        a, lr = self.a, self.a.learning_rate
        if a.decay_steps <= 0:
            return lr
        if a.polynomial_decay:
            left = 1 - min(step, a.decay_steps) / a.decay_steps
            return (lr - a.end_learning_rate) * left ** a.power + \
                a.end_learning_rate
        if a.smooth_decay:
            return lr * a.decay_rate ** (step / a.decay_steps)
        return lr * a.decay_rate ** (step // a.decay_steps)

    def apply(self, step, var, slots, g):
        """The update of step + 1 (the global step was step) to var and
        its slots (a list, changed in place); returns the new var."""
        a, lr = self.a, self.rate(step)
        if a.optimizer == "sgd":
            return var - lr * g
        if a.optimizer == "momentum":
            slots[0] = a.momentum * slots[0] + g
            if a.nesterov:
                return var - lr * (g + a.momentum * slots[0])
            return var - lr * slots[0]
        if a.optimizer == "rmsprop" and a.centered:
            slots[0] = slots[0] + (g * g - slots[0]) * (1 - a.rho)
            slots[1] = slots[1] + (g - slots[1]) * (1 - a.rho)
            slots[2] = a.momentum * slots[2] + lr * g / np.sqrt(
                slots[0] - slots[1] * slots[1] + a.epsilon)
            return var - slots[2]
        if a.optimizer == "rmsprop":
            slots[0] = slots[0] + (g * g - slots[0]) * (1 - a.rho)
            slots[1] = a.momentum * slots[1] + lr * g / np.sqrt(
                slots[0] + a.epsilon)
            return var - slots[1]
        if a.optimizer == "adagrad":
            slots[0] = slots[0] + g * g
            return var - lr * g / np.sqrt(slots[0])
        t = step + 1
        alpha = lr * np.sqrt(1 - a.beta2 ** t) / (1 - a.beta1 ** t)
        slots[0] = a.beta1 * slots[0] + (1 - a.beta1) * g
        slots[1] = a.beta2 * slots[1] + (1 - a.beta2) * g * g
        return var - alpha * slots[0] / (np.sqrt(slots[1]) + a.epsilon)


def split_mirrors(t):
    """The tensors of a mirrored plan over several devices hold a copy of
    each variable and slot per device, `<var>/replica_<k>[/<slot>]`, equal to
    copy 0 (which the reference trains): returns the tensors without them
    and {copy: the copy 0 it mirrors}, after checking that each equals it.
    """
    mirrors = {}
    for name in t:
        m = re.match(r"^(.*)/replica_[0-9]+(/[^/]+)?$", name)
        if m and m.group(1) + (m.group(2) or "") in t:
            base = m.group(1) + (m.group(2) or "")
            if not np.array_equal(t[name], t[base]):
                sys.exit("numpy_reference: mirrored copy %s differs from %s"
                         % (name, base))
            mirrors[name] = base
    return {k: x for k, x in t.items() if k not in mirrors}, mirrors


def clip(g, args):
    """The summed gradients clipped as TensorFlow clips them: each to an
    L2 norm of at most C (tf.clip_by_norm, g * C / max(|g|, C)), or all
    together to a global norm of at most C (tf.clip_by_global_norm, every g
    * (C * (1 / max(N, C)) + (N - N)) for the global norm N)."""
    if args.clip_gradient_norm > 0:
        c = args.clip_gradient_norm
        for k in g:
            g[k] = g[k] * c / max(np.sqrt((g[k] ** 2).sum()), c)
    if args.clip_global_norm > 0:
        c = args.clip_global_norm
        norm = np.sqrt(sum((x ** 2).sum() for x in g.values()))
        scale = c * (1 / max(norm, c)) + (norm - norm)
        for k in g:
            g[k] = g[k] * scale
    return g


def check_initial(t, slots, initial_accumulator):
    """The state of step 0 as the model files define it: the global step 0;
    biases, betas and moving means zeros, gammas and moving variances
    ones; every optimizer slot zeros but RMSProp's mean square, ones, and
    Adagrad's accumulator, initial_accumulator; and the weight matrices and
    filters
    drawn from Glorot's uniform distribution (the default initializer):
    within +-sqrt(6 / (fan_in + fan_out)) (a float32 ulp over), where a filter's fans count its
    window, with the distribution's mean 0 and variance limit^2 / 3 to 5
    standard errors of the sample's. Prints `initial state: N tensors` or
    exits with the first that differs."""
    def fail(name, what):
        sys.exit("numpy_reference: initial %s %s" % (name, what))

    if t["global_step"] != 0:
        fail("global_step", "is %s, not 0" % t["global_step"])
    for name, x in t.items():
        leaf = name.rsplit("/", 1)[-1]
        if leaf in Optimizer.ONES and leaf in slots:
            if np.any(x != 1):
                fail(name, "is not all ones")
        elif leaf in Optimizer.INITIAL_ACCUMULATOR and leaf in slots:
            if np.any(x != initial_accumulator):
                fail(name, "is not all %g" % initial_accumulator)
        elif leaf in slots or leaf in ("biases", "bias", "beta",
                                       "moving_mean"):
            if np.any(x != 0):
                fail(name, "is not all zeros")
        elif leaf in ("gamma", "moving_variance"):
            if np.any(x != 1):
                fail(name, "is not all ones")
        elif leaf in ("weights", "kernel"):
            window = int(np.prod(x.shape[:-2]))
            fan_in, fan_out = window * x.shape[-2], window * x.shape[-1]
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            n, var = x.size, limit ** 2 / 3
            # A float32 model's draw, rounded, may pass the limit by half
            # a float32 ulp.
            if np.abs(x).max() > limit * (1 + 2.0 ** -23):
                fail(name, "has %.17g, beyond the limit %.17g" % (
                    np.abs(x).max(), limit))
            if abs(x.mean()) > 5 * np.sqrt(var / n):
                fail(name, "has mean %g" % x.mean())
            # The variance of a uniform sample's variance: 4 limit^4 / 45n.
            if abs(x.var() - var) > 5 * np.sqrt(4 * limit ** 4 / (45 * n)):
                fail(name, "has variance %g, not about %g" % (x.var(), var))
        elif name != "global_step":
            fail(name, "is not a variable of the examples")
    print("initial state: %d tensors" % len(t))


def evaluate(forward, v, data, batch=100):
    """The evaluation program's means over the t10k split: the loss (the
    models' only loss, without regularization) and the accuracy."""
    images = read_idx(os.path.join(data, "t10k-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data, "t10k-labels-idx1-ubyte.gz"))
    loss_sum, correct = 0.0, 0
    for lo in range(0, len(labels), batch):
        x = images[lo:lo + batch].astype(np.float64) / 255.0
        y = labels[lo:lo + batch].astype(np.int64)
        logits, _ = forward(v, x, False)
        loss, _ = xent(logits, y)
        loss_sum += loss * len(y)
        correct += int((logits.argmax(axis=1) == y).sum())
    print("eval accuracy %.17g loss %.17g" % (correct / len(labels),
                                              loss_sum / len(labels)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, required=True,
                    help="the global step to stop after")
    ap.add_argument("--batch", type=int, required=True,
                    help="examples of a step, over all clones")
    ap.add_argument("--clones", type=int, default=1,
                    help="clones sharing each batch in equal slices")
    ap.add_argument("--replicas", type=int, default=1,
                    help="processes (mirrored replicas, --clones each) "
                    "sharing each batch in equal shards, replica r's run "
                    "seed XORed with FNV-1a('mdrt.replica.r') for r > 0")
    ap.add_argument("--optimizer", choices=sorted(Optimizer.SLOTS),
                    default="adam")
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--decay-steps", type=int, default=0)
    ap.add_argument("--decay-rate", type=float, default=1.0)
    ap.add_argument("--smooth-decay", action="store_true")
    ap.add_argument("--polynomial-decay", action="store_true")
    ap.add_argument("--end-learning-rate", type=float, default=1e-4)
    ap.add_argument("--power", type=float, default=1.0)
    ap.add_argument("--l2", type=float, default=0.0)
    ap.add_argument("--momentum", type=float, default=None)
    ap.add_argument("--rho", type=float, default=0.9)
    ap.add_argument("--centered", action="store_true")
    ap.add_argument("--initial-accumulator-value", type=float, default=0.1)
    ap.add_argument("--clip-gradient-norm", type=float, default=0.0)
    ap.add_argument("--clip-global-norm", type=float, default=0.0)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--epsilon", type=float, default=None)
    ap.add_argument("--evaluate", action="store_true",
                    help="after the last step, print the mean loss and "
                    "accuracy over the t10k split (batch-norm moving "
                    "averages instead of batch statistics) as "
                    "`eval accuracy A loss L`")
    ap.add_argument("--dropout-rate", type=float, default=0.4,
                    help="the CNN's dropout rate (the model's: 0.4)")
    ap.add_argument("--check-initial", action="store_true",
                    help="check that CHECKPOINT is the state of step 0 "
                    "(check_initial)")
    ap.add_argument("--final", metavar="FILE",
                    help="write the variables and slots after the last "
                    "step there, as mdrun --print-checkpoint prints them")
    args = ap.parse_args()

    forward, regularized = MODELS[args.model]
    opt = Optimizer(args)
    step, seed, t = read_checkpoint(args.checkpoint)
    t, mirrors = split_mirrors(t)
    # Each replica's dropout: its run seed (docs/Ops.md, Dropout).
    dropouts = [Dropout(seed if r == 0 else seed ^ fnv1a("mdrt.replica.%d" % r),
                        args.dropout_rate) for r in range(args.replicas)]
    if args.check_initial:
        check_initial(t, opt.slots, args.initial_accumulator_value)
    # The variables: the trainable ones are those the model's step gives
    # gradients for, the others state it updates (moving averages).
    slot_names = {k + "/" + s for k in t for s in opt.slots}
    v = {k: t[k] for k in t if k != "global_step" and k not in slot_names}
    slots = {}

    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"))
    while step < args.steps:
        lo = step * args.batch
        x = images[lo:lo + args.batch].astype(np.float64) / 255.0
        y = labels[lo:lo + args.batch].astype(np.int64)
        # model_deploy's clones: each a slice of the batch (its own batch
        # statistics), its loss scaled by 1 / clones, the gradients summed;
        # the update ops (moving averages) the first clone's only. Replicas:
        # each a shard of the batch (its clones' slices), the gradients
        # averaged over them (docs/Passes.md, scale-losses).
        loss, g = 0.0, {}
        parts = args.replicas * args.clones
        n = args.batch // parts
        for p in range(parts):
            r, c = divmod(p, args.clones)
            ctx = {"dropout": dropouts[r], "step": step,
                   "scope": "clone_%d/" % c if args.clones > 1 else ""}
            logits, back = forward(v if p == 0 else dict(v),
                                   x[p * n:(p + 1) * n], True, ctx)
            clone_loss, dl = xent(logits, y[p * n:(p + 1) * n])
            loss += clone_loss / parts
            for k, gk in back(dl / parts).items():
                g[k] = g[k] + gk if k in g else gk
        for k in regularized(v):
            loss += args.l2 * (v[k] ** 2).sum() / 2
            g[k] = g[k] + args.l2 * v[k]
        clip(g, args)
        print("step %d loss %.17g" % (step + 1, loss))
        for k in g:
            if k not in slots:
                missing = [k + "/" + s for s in opt.slots
                           if k + "/" + s not in t]
                if missing:
                    sys.exit("numpy_reference: no slot %s in %s" % (
                        missing[0], args.checkpoint))
                slots[k] = [t[k + "/" + s] for s in opt.slots]
            v[k] = opt.apply(step, v[k], slots[k], g[k])
        step += 1
    if args.evaluate:
        evaluate(forward, v, args.data)
    if args.final:
        out = dict(v)
        for k, ss in slots.items():
            out.update({k + "/" + n: x for n, x in zip(opt.slots, ss)})
        out.update({m: out[base] for m, base in mirrors.items()})
        write_checkpoint(args.final, step, out)


if __name__ == "__main__":
    main()
