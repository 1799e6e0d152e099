"""Data for the batch-norm classifier whose halves differ: 64 training
examples of 4 features, the first 32 near 0 and the last 32 near 2, so the
two shards of a global batch of 64 have different batch statistics; and 200
test examples of both kinds. Label 1 when the first two features outweigh
the last two."""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
from idx import write_idx


def examples(n, offset, rng):
    x, y = [], []
    for _ in range(n):
        row = [offset + rng.random() for _ in range(4)]
        x.append(row)
        y.append([1.0 if row[0] + row[1] > row[2] + row[3] else 0.0])
    return x, y


out = sys.argv[1]
rng = random.Random(7)
x0, y0 = examples(32, 0.0, rng)
x1, y1 = examples(32, 2.0, rng)
write_idx(os.path.join(out, "train-x-idx2-ubyte"), x0 + x1, "f32")
write_idx(os.path.join(out, "train-y-idx2-ubyte"), y0 + y1, "f32")
tx0, ty0 = examples(100, 0.0, rng)
tx1, ty1 = examples(100, 2.0, rng)
write_idx(os.path.join(out, "t10k-x-idx2-ubyte"), tx0 + tx1, "f32")
write_idx(os.path.join(out, "t10k-y-idx2-ubyte"), ty0 + ty1, "f32")
