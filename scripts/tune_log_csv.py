#!/usr/bin/env python3
"""Measured candidate times from a `weft tune` log, as the calibration fixture's CSV.

Reads the progress lines `weft tune` prints on standard error ("weft tune: AllReduce 2 MiB:
candidate 9 of 61, allpairs (hand-built, Simple, x24): 47.72 us; best ...") and writes one row
per candidate and size from --min-bytes up (default 64 KiB, issue 32's calibration range):
collective,bytes,candidate,measured_us. Candidates the simulator cannot time (the one-shot
kernel, the default-table incumbent) are left out.

    scripts/tune_log_csv.py ROUND_OUT/all.log --ranks 4 > tests/data/calibration/tune-h200x4.csv
"""
import argparse
import csv
import re
import sys

LINE = re.compile(r"weft tune: (\w+) (\d+) (B|KiB|MiB|GiB): candidate \d+ of \d+, (.*?): ([\d.]+) us; best")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--ranks", type=int, required=True, help="the GPUs the log's run had")
    p.add_argument("--min-bytes", type=int, default=64 << 10)
    a = p.parse_args()
    rows = []
    with open(a.log, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            coll, n, unit, cand, us = m.groups()
            size = int(n) * UNITS[unit]
            if size < a.min_bytes or cand.startswith("default table") or cand.startswith("oneshot"):
                continue
            rows.append((coll, size, cand, us))
    if not rows:
        print(f"tune_log_csv.py: no candidate times from {a.min_bytes} bytes in {a.log}", file=sys.stderr)
        return 1
    write_rows(a.ranks, rows)
    return 0


def write_rows(ranks, rows, header=True, out=None):
    """The fixture's CSV (tests/data/calibration): ranks,collective,bytes,candidate,measured_us."""
    w = csv.writer(out or sys.stdout, lineterminator="\n")
    if header:
        w.writerow(["ranks", "collective", "bytes", "candidate", "measured_us"])
    for coll, size, cand, us in rows:
        w.writerow([ranks, coll, size, cand, us])


if __name__ == "__main__":
    sys.exit(main())
