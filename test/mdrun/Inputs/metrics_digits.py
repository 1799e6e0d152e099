"""Checks metrics-digits.test's runs: LOG (--print-losses) against METRICS
(--log-every=1) for a model of TYPE (float32 or float64). Every number of
the metrics file is in its shortest form for its type (float32 for a
float32 model's values and for examples_per_sec, float64 for a float64
model's), and each step's loss is the one --print-losses printed."""
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


def as_type(x, kind):
    # A float32 value is compared as the float both sides read back to.
    if kind == "float32":
        return struct.unpack("f", struct.pack("f", x))[0]
    return x


def digits(text):
    mantissa = re.sub(r"[eE].*", "", text).replace("-", "").replace(".", "")
    return len(mantissa.lstrip("0").rstrip("0") or "0")


def check(where, raw, kind):
    limit = 9 if kind == "float32" else 17
    if digits(raw) > limit:
        sys.exit("%s: %s has more than %d digits" % (where, raw, limit))
    # No shorter form reads back to the same value.
    for p in range(1, digits(raw)):
        if as_type(float("%.*g" % (p, float(raw))), kind) == \
                as_type(float(raw), kind):
            sys.exit("%s: %s is not the shortest form" % (where, raw))


steps = evals = values = 0
for line in open(metrics):
    record = json.loads(line)
    step = record["step"]
    # The numbers as written, in the order of the line.
    for key, raw in re.findall(r'"([^"]+)":(-?[0-9][^,}]*)', line):
        if key in ("step", "eval_examples"):
            continue
        kind = "float32" if key == "examples_per_sec" else dtype
        check("step %d %s" % (step, key), raw, kind)
        values += 1
    if "loss" in record:
        raw = re.search(r'"loss":([^,}]+)', line).group(1)
        if as_type(float(raw), dtype) != as_type(float(printed[step]), dtype):
            sys.exit("step %d: metrics loss %s, printed %s" % (
                step, raw, printed[step]))
        steps += 1
    if "eval_loss" in record:
        evals += 1
print("%d steps, %d evaluations, %d numbers: each the shortest form, "
      "each loss the printed one" % (steps, evals, values))
