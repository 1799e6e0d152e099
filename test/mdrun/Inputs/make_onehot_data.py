"""model_deploy_test's training data: 16 examples of 4 features, one-hot in
column 2*label + {0,1}, labels 0 or 1. Written twice in a row (32 rows) so
that each of two clones sees all 16, as each clone of the TF test does."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from idx import write_idx

out = sys.argv[1]
labels = [0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0]
pick = [0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0]
x, y = [], []
for l, p in zip(labels, pick):
    row = [0.0] * 4
    row[2 * l + p] = 1.0
    x.append(row)
    y.append([float(l)])
write_idx(os.path.join(out, "train-x-idx2-ubyte"), x + x, "f32")
write_idx(os.path.join(out, "train-y-idx2-ubyte"), y + y, "f32")
with open(os.path.join(out, "column_means.txt"), "w") as f:
    f.write(" ".join("%.9g" % (sum(r[c] for r in x) / 16) for c in range(4)))
