#!/usr/bin/env python3
"""Checks the memory plan of a plan printed by `mdplan --emit=plan-text`.

For every program and device:
  - peak (the program's arena on the device) <= naive, and naive is the sum
    of the program's transient root buffers on the device, each rounded up
    to the device's alignment (256 bytes on GPUs, 64 on CPUs);
  - every buffer offset is aligned, and fits its region;
  - two transient buffers live at the same time never share a byte. A
    buffer is live from the kernel that writes it (the start of the step
    for program inputs) to its last reader in the device's kernel list (the
    end of the step for program outputs and sent tensors); a view lives
    with its root. Planners may keep buffers longer; this is the least
    they must keep;
  - persistent buffers never overlap.
For every device: its arena is the largest peak over the programs.

Prints one line per program and device ("<program> d<N> peak=P naive=N
smaller|equal") and a final "memory plan ok"; exits 1 with the first
problem otherwise.
"""

import re
import sys

DEVICE = re.compile(r"^device d(\d+) (\S+) (cpu|gpu) arena=(\d+) .* "
                    r"persistent=(\d+) ")
BUFFER = re.compile(r"^buffer b(\d+) (\S+) \S+ d(\d+) (arena|persistent)\+"
                    r"(\d+) (\d+)(?: view-of b(\d+))?$")
PROGRAM = re.compile(r"^program (\S+) batch=\d+$")
PROG_DEVICE = re.compile(r"^  device d(\d+) kernels=\d+ peak=(\d+) .* "
                         r"naive=(\d+) ")
KERNEL = re.compile(r"^    k(\d+) (\S+) (\S+) \(([^)]*)\) -> \(([^)]*)\)")
INPUT = re.compile(r"^  input \S+ feature=\S* b(\d+)$")
OUTPUT = re.compile(r"^  output \S+ \S+ b(\d+)$")


def fail(msg):
    print("error: " + msg)
    sys.exit(1)


def ids(text):
    return [int(t.strip()[1:]) for t in text.split(",") if t.strip()]


def main():
    lines = open(sys.argv[1]).read().splitlines()
    devices = {}
    buffers = {}
    programs = []
    prog = None
    dev = None
    for line in lines:
        m = DEVICE.match(line)
        if m:
            devices[int(m.group(1))] = dict(
                name=m.group(2), gpu=m.group(3) == "gpu",
                arena=int(m.group(4)), persistent=int(m.group(5)))
            continue
        m = BUFFER.match(line)
        if m:
            buffers[int(m.group(1))] = dict(
                name=m.group(2), device=int(m.group(3)),
                persistent=m.group(4) == "persistent",
                offset=int(m.group(5)), bytes=int(m.group(6)),
                root=int(m.group(7)) if m.group(7) else None)
            continue
        m = PROGRAM.match(line)
        if m:
            prog = dict(name=m.group(1), devices={}, inputs=[], outputs=[])
            programs.append(prog)
            continue
        if prog is None:
            continue
        m = PROG_DEVICE.match(line)
        if m:
            dev = dict(peak=int(m.group(2)), naive=int(m.group(3)),
                       kernels=[])
            prog["devices"][int(m.group(1))] = dev
            continue
        m = KERNEL.match(line)
        if m:
            dev["kernels"].append(dict(op=m.group(2), name=m.group(3),
                                       ins=ids(m.group(4)),
                                       outs=ids(m.group(5))))
            continue
        m = INPUT.match(line)
        if m:
            prog["inputs"].append(int(m.group(1)))
            continue
        m = OUTPUT.match(line)
        if m:
            prog["outputs"].append(int(m.group(1)))
    if not devices or not buffers or not programs:
        fail("no plan in the input")

    def align(d):
        return 256 if devices[d]["gpu"] else 64

    def root(b):
        while buffers[b]["root"] is not None:
            b = buffers[b]["root"]
        return b

    # Offsets aligned and inside their region; views inside their root.
    for b, info in buffers.items():
        d = info["device"]
        region = "persistent" if info["persistent"] else "arena"
        if info["root"] is None and info["offset"] % align(d):
            fail("buffer b%d (%s) at offset %d is not %d-aligned" %
                 (b, info["name"], info["offset"], align(d)))
        if info["offset"] + info["bytes"] > devices[d][region]:
            fail("buffer b%d (%s) does not fit the %s of d%d" %
                 (b, info["name"], region, d))
        if info["root"] is not None:
            r = buffers[info["root"]]
            if (info["offset"] < r["offset"] or info["offset"] +
                    info["bytes"] > r["offset"] + r["bytes"]):
                fail("view b%d (%s) is outside its root" % (b, info["name"]))

    # Persistent buffers never overlap.
    for d in devices:
        spans = sorted((i["offset"], i["offset"] + max(i["bytes"], 1), b)
                       for b, i in buffers.items()
                       if i["device"] == d and i["persistent"] and
                       i["root"] is None)
        for (s0, e0, b0), (s1, e1, b1) in zip(spans, spans[1:]):
            if s1 < e0:
                fail("persistent buffers b%d and b%d overlap on d%d" %
                     (b0, b1, d))

    peaks = {}
    pairs = 0
    for p in programs:
        end = 1 << 60
        for d, dp in p["devices"].items():
            peaks[d] = max(peaks.get(d, 0), dp["peak"])
            if dp["peak"] > dp["naive"]:
                fail("program %s d%d: peak %d > naive %d" %
                     (p["name"], d, dp["peak"], dp["naive"]))
            # Conservative live ranges of the root buffers.
            live = {}

            def use(b, t):
                if buffers[b]["persistent"] or buffers[b]["device"] != d:
                    return
                r = root(b)
                s, e = live.get(r, (t, t))
                live[r] = (min(s, t), max(e, t))

            for b in p["inputs"]:
                use(b, -1)
            for t, k in enumerate(dp["kernels"]):
                for b in k["outs"]:
                    use(b, t)
                for b in k["ins"]:
                    use(b, end if k["op"] == "Send" else t)
            for b in p["outputs"]:
                if root(b) in live:
                    use(b, end)
            naive = sum((max(buffers[r]["bytes"], 1) + align(d) - 1) //
                        align(d) * align(d) for r in live)
            if naive != dp["naive"]:
                fail("program %s d%d: naive is %d, the buffers need %d" %
                     (p["name"], d, dp["naive"], naive))
            items = sorted(live.items(), key=lambda x: x[1][0])
            for i, (b0, (s0, e0)) in enumerate(items):
                for b1, (s1, e1) in items[i + 1:]:
                    if s1 > e0:
                        break
                    pairs += 1
                    x0, x1 = buffers[b0], buffers[b1]
                    if (x0["offset"] < x1["offset"] + max(x1["bytes"], 1) and
                            x1["offset"] < x0["offset"] + max(x0["bytes"], 1)):
                        fail("program %s d%d: b%d (%s) and b%d (%s) are live "
                             "together but share bytes" %
                             (p["name"], d, b0, x0["name"], b1, x1["name"]))
            print("%s d%d peak=%d naive=%d %s" %
                  (p["name"], d, dp["peak"], dp["naive"],
                   "smaller" if dp["peak"] < dp["naive"] else "equal"))
    for d, info in devices.items():
        if info["arena"] != peaks.get(d, 0):
            fail("d%d: arena %d is not the largest peak %d" %
                 (d, info["arena"], peaks.get(d, 0)))
    print("memory plan ok (%d overlapping pairs checked)" % pairs)


if __name__ == "__main__":
    main()
