"""Overwrites the first values of a float tensor of a checkpoint file and
rewrites its CRC-32, reading the layout docs/Checkpoints.md describes
(format version 3): lets a test make a checkpoint that holds NaN or
infinity.

  set_checkpoint_values.py FILE TENSOR VALUE...   (VALUE: a float, nan, inf)
"""
import struct
import sys
import zlib

path, name, values = sys.argv[1], sys.argv[2], [float(v) for v in sys.argv[3:]]
data = bytearray(open(path, "rb").read())
if data[:8] != b"MDRTCKPT" or struct.unpack_from("<I", data, 8)[0] != 3:
    sys.exit("set_checkpoint_values: not a version 3 checkpoint: " + path)
header, = struct.unpack_from("<I", data, 12)
count, = struct.unpack_from("<I", data, 64)
at = header
for _ in range(count):
    length, = struct.unpack_from("<I", data, at)
    tensor = data[at + 4:at + 4 + length].decode()
    at += 4 + length
    dtype, rank = data[at], data[at + 1]
    at += 4 + 8 * rank
    size, = struct.unpack_from("<Q", data, at)
    at += 8
    at += -at % 8
    if tensor == name:
        if dtype not in (1, 2):
            sys.exit("set_checkpoint_values: %s is not a float tensor" % name)
        fmt = "<f" if dtype == 1 else "<d"
        step = struct.calcsize(fmt)
        if len(values) * step > size:
            sys.exit("set_checkpoint_values: %s has fewer values" % name)
        for i, v in enumerate(values):
            struct.pack_into(fmt, data, at + i * step, v)
        struct.pack_into("<I", data, len(data) - 4, zlib.crc32(data[:-4]))
        open(path, "wb").write(data)
        sys.exit(0)
    at += size
sys.exit("set_checkpoint_values: no tensor %s in %s" % (name, path))
