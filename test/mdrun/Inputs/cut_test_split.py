"""Makes a Fashion-MNIST directory whose training split is the dataset's
(links) and whose t10k split is its first N examples, so that an
evaluation over it is quick (numpy-reference.test).

  cut_test_split.py DATASET_DIR OUT_DIR N
"""
import gzip
import os
import struct
import sys

src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(out, exist_ok=True)
for kind in ("images-idx3", "labels-idx1"):
    name = "train-%s-ubyte.gz" % kind
    if not os.path.lexists(os.path.join(out, name)):
        os.symlink(os.path.join(src, name), os.path.join(out, name))
    name = "t10k-%s-ubyte.gz" % kind
    with gzip.open(os.path.join(src, name), "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = list(struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim]))
    per = 1
    for d in dims[1:]:
        per *= d
    dims[0] = min(n, dims[0])
    head = data[:4] + struct.pack(">%dI" % ndim, *dims)
    body = data[4 + 4 * ndim:4 + 4 * ndim + dims[0] * per]
    with gzip.open(os.path.join(out, name), "wb") as f:
        f.write(head + body)
