#!/usr/bin/env python3
"""Checks that every option a tool's --help lists is documented.

usage: options_documented.py GUIDE TOOL HELP_FILE [IGNORED ...]

Reads HELP_FILE (the tool's --help output), takes every option it lists
(a line whose first word starts with '-'; LLVM's "--name=<value>" and
mdrun's "--name=VALUE" alike) and looks for each in GUIDE's option tables:
as `--name` (in backquotes) on a table row (a line that starts with '|'). Prints one line per
missing option and exits 1 when there is one; otherwise prints how many
options were found documented. IGNORED names options not to look for.
"""
import re
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[2])
    guide_path, tool, help_path = sys.argv[1:4]
    ignored = set(sys.argv[4:])
    guide = "\n".join(l for l in open(guide_path, encoding="utf-8")
                      if l.startswith("|"))
    options = []
    for line in open(help_path, encoding="utf-8"):
        m = re.match(r"\s+(-{1,2}[A-Za-z][A-Za-z0-9-]*)", line)
        if m and m.group(1) not in options and m.group(1) not in ignored:
            options.append(m.group(1))
    if not options:
        sys.exit("%s: no option found in %s" % (tool, help_path))
    missing = [o for o in options if not re.search("`" + re.escape(o) + "(?![A-Za-z0-9-])", guide)]
    for o in missing:
        print("%s: option %s is not in the option tables of %s" % (
            tool, o, guide_path))
    if missing:
        sys.exit(1)
    print("%s: %d options documented" % (tool, len(options)))


if __name__ == "__main__":
    main()
