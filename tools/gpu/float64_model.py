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
Fails when the model names a dtype for a variable or a floating-point
dtype for an input already (so nothing is left half converted) or has no
variable at all. Also used by test/mdrun/numpy-reference.test (mdrun's
float64 models against a NumPy implementation).
"""
import argparse
import re
import sys


def blocks(text, keyword):
    """(start, end) of each `keyword { ... }` message in text, end just
    past its closing brace (nested messages included)."""
    for m in re.finditer(r"\b%s\s*\{" % keyword, text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            raise ValueError("unbalanced braces after '%s'" % keyword)
        yield m.start(), i


def convert(text, batch):
    # Variables: `variable { ... }` may hold an initializer message, so the
    # field goes first instead of after the shape.
    variables = list(blocks(text, "variable"))
    if not variables:
        raise ValueError("the model has no variable")
    for b, e in variables:
        if re.search(r"\bdtype\s*:", text[b:e]):
            raise ValueError("a variable names its dtype already")
    # Inputs: floating-point ones become FLOAT64; integer labels keep
    # theirs.
    inputs = list(blocks(text, "data"))
    for b, e in inputs:
        d = re.search(r"\bdtype\s*:\s*(\w+)", text[b:e])
        if d and d.group(1) not in ("INT32", "INT64", "BOOL"):
            raise ValueError("an input names a floating-point dtype already")
    # Edit from the end so that earlier offsets stay valid.
    edits = [(m_end(text, b), " dtype: FLOAT64") for b, _ in variables]
    edits += [(m_end(text, b), " dtype: FLOAT64")
              for b, e in inputs if not re.search(r"\bdtype\s*:", text[b:e])]
    for at, what in sorted(edits, reverse=True):
        text = text[:at] + what + text[at:]
    if batch:
        text, n = re.subn(r"\bbatch_size\s*:\s*\d+", "batch_size: %d" % batch,
                          text)
        if n != 1:
            raise ValueError("expected one batch_size, found %d" % n)
    return text, len(variables)


def m_end(text, start):
    """Just past the opening brace of the message that starts at start."""
    return text.index("{", start) + 1


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
