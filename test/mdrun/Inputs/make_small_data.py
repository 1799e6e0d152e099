"""Data for errors.test: 16 examples of 6 ubyte features and labels in
[0, 3); a variant with 7 features (wrong shape) and one with a label 5."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from idx import write_idx

out = sys.argv[1]
images = [[(i * 7 + j * 13) % 256 for j in range(6)] for i in range(16)]
labels = [i % 3 for i in range(16)]
write_idx(os.path.join(out, "train-image-idx2-ubyte"), images, "u8")
write_idx(os.path.join(out, "train-label-idx1-ubyte"), labels, "u8")
for sub, imgs, labs in (("wrong", [r + [0] for r in images], labels),
                        ("badlabels", images, labels[:-1] + [5])):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
    write_idx(os.path.join(out, sub, "train-image-idx2-ubyte"), imgs, "u8")
    write_idx(os.path.join(out, sub, "train-label-idx1-ubyte"), labs, "u8")
