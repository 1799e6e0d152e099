"""Computes, from `mdrun --print-checkpoint` output (stdin), each tensor's
summary line as `mdrun --checkpoint-summary` prints it (checkpoint-summary.
test compares the two)."""
import math
import struct
import sys


def as_float32(x):
    # A float32's 9 printed digits read back to it only as a float32.
    return struct.unpack("f", struct.pack("f", x))[0]

for line in sys.stdin:
    if not line.startswith("tensor "):
        continue
    head, _, values = line.rstrip("\n").partition(" =")
    _, name, desc = head.split()
    xs = [float(v) for v in values.split()]
    if desc.startswith("float32"):
        xs = [as_float32(x) for x in xs]
    finite = [x for x in xs if math.isfinite(x)]
    # A zero as +0 in the range.
    finite = [x + 0.0 for x in finite]
    stats = [0.0] * 4
    if finite:
        stats = [min(finite), max(finite), sum(finite) / len(finite),
                 math.sqrt(sum(x * x for x in finite) / len(finite))]
    integer = not desc.startswith("float")
    out = ("tensor %s %s: min %s max %s mean %.6g rms %.6g zeros %d" % (
        name, desc, *[("%.0f" if integer else "%.6g") % x for x in stats[:2]],
        *stats[2:], sum(1 for x in finite if x == 0)))
    nans = sum(1 for x in xs if math.isnan(x))
    infs = sum(1 for x in xs if math.isinf(x))
    if nans:
        out += " nan %d" % nans
    if infs:
        out += " inf %d" % infs
    print(out)
