#!/usr/bin/env python3
"""Writes a libFuzzer dictionary for the model and deployment fuzz targets
(scripts/fuzz.sh passes it with -dict): the text format's field names and
enum values (lib/Frontend/ModelDesc.proto), the op names
(include/mdplan/IR/Ops.def), attribute names the ops read (docs/Ops.md) and
the text format's punctuation. Mutating with these tokens reaches the
passes far more often than byte flips, which mostly break the syntax.

  fuzz/make_dict.py OUTPUT
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_dict.py OUTPUT")
    tokens = set()
    proto = read("lib/Frontend/ModelDesc.proto")
    for m in re.finditer(r"^\s*(?:optional|repeated)?\s*[\w.]+\s+(\w+)\s*=\s*\d+",
                         proto, re.M):
        tokens.add(m.group(1) + ":")
        tokens.add(m.group(1) + " {")
    for m in re.finditer(r"^\s*([A-Z][A-Z0-9_]*)\s*=\s*\d+\s*;", proto, re.M):
        tokens.add(m.group(1))
    for m in re.finditer(r"^MDPLAN_OP\((\w+),", read("include/mdplan/IR/Ops.def"),
                         re.M):
        tokens.add('op: "%s"' % m.group(1))
    for m in re.finditer(r"`([a-z][a-z0-9_]*)`", read("docs/Ops.md")):
        tokens.add('attr { name: "%s"' % m.group(1))
    tokens.update(["{", "}", "[", "]", ":", '"', "-1", "0", "1", "2", "1e-3",
                   "true", "false", 'input: "', ':1"', "^"])
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        for t in sorted(tokens):
            out.write('"%s"\n' % t.replace("\\", "\\\\").replace('"', '\\"'))


if __name__ == "__main__":
    main()
