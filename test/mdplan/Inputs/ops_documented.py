"""Checks that every op of the registry (Ops.def) has a row in the op tables
of docs/Ops.md: its name, in backquotes, in the first cell of a table row.

  ops_documented.py OPS_DEF OPS_MD
"""
import re
import sys


def main():
    ops_def, ops_md = sys.argv[1], sys.argv[2]
    names = re.findall(r"^MDPLAN_OP\((\w+),", open(ops_def).read(), re.M)
    documented = set()
    for line in open(ops_md):
        if not line.startswith("|"):
            continue
        first = line.split("|")[1]
        documented.update(re.findall(r"`(\w+)`", first))
    missing = [n for n in names if n not in documented]
    for n in missing:
        print("op %s is not in the op tables of %s" % (n, ops_md))
    if missing:
        return 1
    print("%d ops documented" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
