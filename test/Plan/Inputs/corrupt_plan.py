#!/usr/bin/env python3
"""Damaged plans for `mdplan --dump-plan`.

  corrupt_plan.py fuzz PLAN WORKDIR
      Truncates PLAN at many lengths and flips bytes at many positions,
      runs `mdplan --dump-plan` on each and checks that it never dies of a
      signal: a truncated plan is always rejected (exit 1, one error
      on stderr, nothing on stdout); a flipped byte is either rejected the
      same way or, when the damage still makes a valid plan, printed (exit
      0, nothing on stderr). Prints a summary; exits 1 on the first
      violation.
  corrupt_plan.py set-version PLAN OUT VERSION
      Writes PLAN with its format version replaced.
  corrupt_plan.py set-byte PLAN OUT OFFSET VALUE
      Writes PLAN with one byte replaced.
  corrupt_plan.py truncate PLAN OUT LENGTH
      Writes the first LENGTH bytes of PLAN.
"""

import os
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def dump(path):
    p = subprocess.run(["mdplan", "--dump-plan", path], capture_output=True)
    return p.returncode, p.stdout, p.stderr


def check_rejected(what, path, rc, out, err):
    if rc != 1:
        return "%s: exit code %d (expected 1)\n%s" % (what, rc, err.decode(
            errors="replace")[-2000:])
    text = err.decode(errors="replace")
    # One error; a damaged name it quotes may hold any byte, newlines too.
    if (not text.startswith("mdplan: error: ") or not text.endswith("\n") or
            text.count("mdplan: error: ") != 1):
        return "%s: not one error: %r" % (what, text[-500:])
    if out:
        return "%s: output on stdout despite the error" % what
    return None


def fuzz(plan, workdir):
    data = open(plan, "rb").read()
    n = len(data)
    os.makedirs(workdir, exist_ok=True)
    cases = []
    lengths = list(range(0, 64)) + list(range(64, n, max(1, n // 120)))
    lengths += [n - 3, n - 2, n - 1]
    for length in lengths:
        cases.append(("truncated to %d bytes" % length, data[:length], True))
    step = max(1, n // 250)
    for pos in range(0, n, step):
        for mask in (0x01, 0x80, 0xff):
            b = bytearray(data)
            b[pos] ^= mask
            cases.append(("byte %d xor 0x%02x" % (pos, mask), bytes(b),
                          False))

    def run(i):
        what, content, must_fail = cases[i]
        path = os.path.join(workdir, "case%d.mdp" % i)
        with open(path, "wb") as f:
            f.write(content)
        rc, out, err = dump(path)
        os.remove(path)
        if rc < 0 or rc > 1:
            return "%s: exit code %d\n%s" % (what, rc, err.decode(
                errors="replace")[-2000:]), None
        if must_fail or rc != 0:
            problem = check_rejected(what, path, rc, out, err)
            if problem is None and must_fail and len(content) >= 8:
                # Cutting into the objects fails FlatBuffers' verification;
                # cutting only the padding after the last one, the length
                # the plan records.
                expected = ("the plan is corrupted or truncated (FlatBuffers "
                            "verification failed)",
                            "the plan is truncated: the file has %d of its %d "
                            "bytes" % (len(content), n))
                text = err.decode(errors="replace")
                if not any(e in text for e in expected):
                    problem = "%s: unexpected message %r" % (what, err)
            return problem, "rejected"
        if err or not out.startswith(b"plan \""):
            return "%s: accepted but printed %r / %r" % (what, out[:80],
                                                         err[:200]), None
        return None, "accepted"

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, range(len(cases))))
    counts = {"rejected": 0, "accepted": 0}
    for problem, outcome in results:
        if problem:
            print("error: " + problem)
            sys.exit(1)
        counts[outcome] += 1
    truncated = sum(1 for c in cases if c[2])
    print("%d truncated plans rejected" % truncated)
    print("%d flipped bytes: %d rejected, %d still valid" %
          (len(cases) - truncated, counts["rejected"] - truncated,
           counts["accepted"]))
    print("no crash")


def set_version(plan, out, version):
    data = bytearray(open(plan, "rb").read())
    table = struct.unpack_from("<I", data, 0)[0]
    vtable = table - struct.unpack_from("<i", data, table)[0]
    vtsize = struct.unpack_from("<H", data, vtable)[0]
    if vtsize < 6:
        sys.exit("the plan has no version field")
    field = struct.unpack_from("<H", data, vtable + 4)[0]
    if field == 0:
        sys.exit("the plan has no version field")
    struct.pack_into("<I", data, table + field, version)
    open(out, "wb").write(data)


def main():
    mode = sys.argv[1]
    if mode == "fuzz":
        fuzz(sys.argv[2], sys.argv[3])
    elif mode == "set-version":
        set_version(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif mode == "set-byte":
        data = bytearray(open(sys.argv[2], "rb").read())
        data[int(sys.argv[4])] = int(sys.argv[5], 0)
        open(sys.argv[3], "wb").write(data)
    elif mode == "truncate":
        data = open(sys.argv[2], "rb").read()
        open(sys.argv[3], "wb").write(data[:int(sys.argv[4])])
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
