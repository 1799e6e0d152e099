"""Checks metrics-digits.test's runs: LOG (--print-losses) against METRICS
(--log-every=1) for a model of TYPE (float32 or float64)."""
import json
import re
import struct
import sys

log, metrics, dtype = sys.argv[1:4]
printed = {}
for line in open(log):
    m = re.match(r"step (\d+) loss (\S+)$", line)
    if m:
        printed[int(m.group(1))] = m.group(2)


def as_type(x):
    # A float32 value is compared as the float both sides read back to.
    if dtype == "float32":
        return struct.unpack("f", struct.pack("f", x))[0]
    return x


def digits(text):
    mantissa = re.sub(r"[eE].*", "", text).replace("-", "").replace(".", "")
    return len(mantissa.lstrip("0").rstrip("0") or "0")


limit = 9 if dtype == "float32" else 17
shortest = True
steps = 0
for line in open(metrics):
    record = json.loads(line)
    raw = re.search(r'"loss":([^,}]+)', line).group(1)
    step = record["step"]
    if as_type(float(raw)) != as_type(float(printed[step])):
        sys.exit("step %d: metrics loss %s, printed %s" % (step, raw,
                                                            printed[step]))
    if digits(raw) > limit:
        sys.exit("step %d: %s has more than %d digits" % (step, raw, limit))
    # No shorter form reads back to the same value.
    for p in range(1, digits(raw)):
        if as_type(float("%.*g" % (p, float(raw)))) == as_type(float(raw)):
            sys.exit("step %d: %s is not the shortest form" % (step, raw))
    steps += 1
print("%d steps: every loss the printed one, at most %d significant digits"
      % (steps, limit))
