#!/usr/bin/env python3
"""Writes a float64 copy of a model (.mdg): every variable and every
floating-point input becomes FLOAT64 (the integer labels keep their dtype;
constants and regularizer scales follow their variables). Optionally sets
the training batch.

  tools/gpu/float64_model.py IN.mdg OUT.mdg [--batch=N]

Used by the GPU checks (tools/gpu/pack.sh, the `losses` check's cnn64):
in float64 the rounding differences between the GPU's and the CPU's sums
stay far below 1e-4 over 20 Adam steps, where float32's grow past it
(docs/Cuda.md), so the GPU's losses must match the CPU's closely.
Fails when the model names a dtype for a variable or a float input already
(so nothing is left half converted) or has no variable at all.
"""
import argparse
import re
import sys


def convert(text, batch):
    # Variables: `variable { ... }` may hold an initializer message, so the
    # field goes first instead of after the shape.
    if re.search(r"variable\s*\{[^}]*\bdtype\s*:", text):
        raise ValueError("a variable names its dtype already")
    text, variables = re.subn(r"\bvariable\s*\{", "variable { dtype: FLOAT64",
                              text)
    if not variables:
        raise ValueError("the model has no variable")

    def data(m):
        body = m.group(1)
        if "dtype" in body:  # labels (INT32) and the like keep theirs
            return m.group(0)
        return "data {%s dtype: FLOAT64 }" % body.rstrip()

    text, _ = re.subn(r"\bdata\s*\{([^{}]*)\}", data, text)
    if batch:
        text, n = re.subn(r"\bbatch_size\s*:\s*\d+", "batch_size: %d" % batch,
                          text)
        if n != 1:
            raise ValueError("expected one batch_size, found %d" % n)
    return text, variables


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    try:
        text, variables = convert(open(a.input).read(), a.batch)
    except (OSError, ValueError) as e:
        sys.exit("float64_model: %s: %s" % (a.input, e))
    with open(a.output, "w") as f:
        f.write("# float64 copy of %s (tools/gpu/float64_model.py)\n" % a.input)
        f.write(text)
    print("float64_model: %d variables to FLOAT64" % variables)


if __name__ == "__main__":
    main()
