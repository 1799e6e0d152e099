#!/usr/bin/env python3
"""Rewrites a plan through its JSON form: edit_plan.py --flatc=F --schema=S
IN OUT STATEMENT... runs each Python STATEMENT with `p` bound to the plan as
flatc's JSON (every field present, enums by name) and writes the result as
a plan again, unverified: the verifier's tests make plans with one defect
each (verifier-errors.test). The edited plan records no length
(`file_bytes` 0: its bytes move), unless a STATEMENT sets one after
`p["file_bytes"] = 0`."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--flatc", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("statements", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([a.flatc, "--json", "--strict-json", "--defaults-json",
                        "--raw-binary", "-o", d, a.schema, "--", a.input],
                       check=True)
        base = os.path.splitext(os.path.basename(a.input))[0]
        with open(os.path.join(d, base + ".json")) as f:
            p = json.load(f)
        p["file_bytes"] = 0
        for s in a.statements:
            exec(s, {"p": p})
        with open(os.path.join(d, "edited.json"), "w") as f:
            json.dump(p, f)
        subprocess.run([a.flatc, "-b", "-o", d, a.schema,
                        os.path.join(d, "edited.json")], check=True)
        with open(os.path.join(d, "edited.mdp"), "rb") as f:
            data = f.read()
    with open(a.output, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    sys.exit(main())
