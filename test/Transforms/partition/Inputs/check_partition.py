#!/usr/bin/env python3
"""Checks a partitioned graph printed by `mdplan --emit=graph`.

  - every node has a device, and every data input comes from a node on the
    same device (the cross-device edges all became Send/Recv pairs);
  - every Recv has exactly one control input, a Send on the device named by
    its "from" attribute, with the same channel, whose "to" attribute names
    the Recv's device; channels are used by exactly one pair;
  - a tensor is received at most once per device.
Prints "<N> nodes, <M> transfers, partition ok", or the first problem and
exits 1.
"""

import re
import sys

NAME = re.compile(r'^\s*name: "(.*)"$')
OP = re.compile(r'^\s*op: "(.*)"$')
INPUT = re.compile(r'^\s*input: "(.*)"$')
ATTR = re.compile(r'^\s*attr \{ name: "(\w+)" (?:i: (-?\d+)|s: "(.*)") \}$')
DEVICE = re.compile(r'^\s*device: "(.*)"$')


def main():
    nodes = {}
    order = []
    cur = None
    for line in open(sys.argv[1]).read().splitlines():
        if line.startswith("node {"):
            cur = dict(inputs=[], controls=[], attrs={}, device=None, op=None)
            continue
        if cur is None:
            continue
        if line == "}":
            nodes[cur["name"]] = cur
            order.append(cur["name"])
            cur = None
            continue
        m = NAME.match(line)
        if m and "name" not in cur:
            cur["name"] = m.group(1)
            continue
        m = OP.match(line)
        if m:
            cur["op"] = m.group(1)
            continue
        m = INPUT.match(line)
        if m:
            if m.group(1).startswith("^"):
                cur["controls"].append(m.group(1)[1:])
            else:
                cur["inputs"].append(m.group(1))
            continue
        m = ATTR.match(line)
        if m:
            cur["attrs"][m.group(1)] = (int(m.group(2)) if m.group(2)
                                        is not None else m.group(3))
            continue
        m = DEVICE.match(line)
        if m:
            cur["device"] = m.group(1)
    if not nodes:
        sys.exit("error: no nodes")
    channels = {}
    received = set()
    transfers = 0
    for name in order:
        n = nodes[name]
        if not n["device"]:
            sys.exit("error: %s has no device" % name)
        for i in n["inputs"]:
            i = i.split(":")[0]
            if nodes[i]["device"] != n["device"]:
                sys.exit("error: %s on %s reads %s on %s" %
                         (name, n["device"], i, nodes[i]["device"]))
        if n["op"] != "Recv":
            continue
        transfers += 1
        sends = [c for c in n["controls"] if nodes[c]["op"] == "Send"]
        if len(sends) != 1:
            sys.exit("error: %s has %d sends" % (name, len(sends)))
        s = nodes[sends[0]]
        ch = n["attrs"].get("channel", 0)
        if s["attrs"].get("channel", 0) != ch:
            sys.exit("error: %s and %s use different channels" %
                     (name, sends[0]))
        if ch in channels:
            sys.exit("error: channel %d used by %s and %s" %
                     (ch, channels[ch], name))
        channels[ch] = name
        if s["device"] != n["attrs"].get("from"):
            sys.exit("error: %s receives from %s, its send is on %s" %
                     (name, n["attrs"].get("from"), s["device"]))
        if s["attrs"].get("to") != n["device"]:
            sys.exit("error: %s sends to %s, its recv is on %s" %
                     (sends[0], s["attrs"].get("to"), n["device"]))
        if s["device"] == n["device"]:
            sys.exit("error: %s and its send are on one device" % name)
        key = (s["inputs"][0], n["device"])
        if key in received:
            sys.exit("error: %s received twice on %s" % key)
        received.add(key)
    print("%d nodes, %d transfers, partition ok" % (len(nodes), transfers))


if __name__ == "__main__":
    main()
