"""Writes a dataset of 4 ubyte features and a 0/1 label stored as ubyte."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from idx import write_idx  # noqa: E402

out = sys.argv[1]
for split, n in (("train", 64), ("t10k", 16)):
    x = [[(i * 37 + j * 11) % 256 for j in range(4)] for i in range(n)]
    y = [[1 if sum(r) > 510 else 0] for r in x]
    write_idx(os.path.join(out, split + "-x-idx2-ubyte"), x, "u8")
    write_idx(os.path.join(out, split + "-y-idx2-ubyte"), y, "u8")
