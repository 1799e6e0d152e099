#!/usr/bin/env python3
"""Sums the kernel durations of an Nsight Compute CSV report per kernel name:

  ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
      --print-units base PROGRAM ARGS... > report.csv
  ncu_summary.py report.csv [--per N]

Prints launches, total and mean microseconds per kernel, largest total
first; --per N divides the totals by N (say, the steps profiled).
"""
import argparse
import csv
import io
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--per", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    # ncu prints its own ==PROF== lines before the table.
    start = text.find('"ID"')
    if start < 0:
        sys.exit("no ncu table in " + a.csv)
    rows = csv.DictReader(io.StringIO(text[start:]))
    total = defaultdict(float)
    count = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        us = v / 1000.0 if unit in ("ns", "nsecond") else (
            v * 1000.0 if unit in ("ms", "msecond") else v)
        name = r["Kernel Name"][:90]
        total[name] += us
        count[name] += 1
    all_us = sum(total.values())
    print("%d kernel launches, %.1f us in all, %.1f us per %g" % (
        sum(count.values()), all_us, all_us / a.per, a.per))
    for name in sorted(total, key=lambda n: -total[n])[:a.top]:
        print("%9.1f us %6.1f%% %5d x %8.2f us  %s" % (
            total[name] / a.per, 100 * total[name] / max(all_us, 1e-9),
            count[name], total[name] / count[name], name))


if __name__ == "__main__":
    main()
