#!/usr/bin/env python3
"""Measured plan times from `weft bench` output, as rows of a calibration fixture's CSV.

Reads the tables `weft bench` prints ("# AllReduce  float32 sum  2 ranks ..." then one row per
size ending in the plan's label, e.g. "ring_allreduce (compiled hpds/state, Simple, x24)")
from round logs, and the markdown rows of `bench/knob_sweep.sh` ("| setting | size | busbw
GB/s | us | thread blocks | plan |"), and writes ranks,collective,bytes,candidate,measured_us
for sizes from --min-bytes (default 64 KiB). Only runs without switches that change how a plan
runs are kept: a bench section whose command sets a WEFT_ variable other than WEFT_ALGO,
WEFT_DATA_DIR or WEFT_GPUS_PER_NODE is skipped, and of the sweep only the rows whose setting
is `default` or `WEFT_INSTANCES=N` (plans that differ only in their instances; the CTA
policies run two roles per block). The one-shot kernel is left out.

    scripts/bench_log_csv.py --ranks 2 --collective AllReduce LOG_OR_MD... > rows.csv
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_log_csv import write_rows  # noqa: E402  (the fixture's one CSV writer)

HEAD = re.compile(r"^# (\w+)\s+\S+ \S+\s+(\d+) ranks")
ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\w+ \|\s+([\d.]+)\s.*\|\s+\S+\s+(\w+ \(.*, (?:Simple|LL|LL128), x\d+\))\s*$")
SECTION = re.compile(r"^==== (\S+) .*?: (.*)$")
KEEP_ENV = {"WEFT_ALGO", "WEFT_DATA_DIR", "WEFT_GPUS_PER_NODE"}
MD = re.compile(r"^\| (default|WEFT_INSTANCES=\d+) \| (\d+) (MiB|GiB) \| [\d.]+ \| ([\d.]+) \| \d+ \| (.*\)) \|$")
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def from_log(path, ranks, rows, min_bytes):
    keep, coll = True, None
    with open(path, errors="replace") as f:
        for line in f:
            m = SECTION.match(line)
            if m:
                env = set(re.findall(r"\b(WEFT_\w+)=", m.group(2)))
                keep = re.search(r"\bweft bench\b", m.group(2)) is not None and env <= KEEP_ENV
                coll = None
                continue
            m = HEAD.match(line)
            if m:
                coll = m.group(1) if int(m.group(2)) == ranks else None
                continue
            m = ROW.match(line)
            if keep and coll and m and int(m.group(1)) >= min_bytes and not m.group(3).startswith("oneshot"):
                rows.append((coll, int(m.group(1)), m.group(3), m.group(2)))


def from_md(path, coll, rows, min_bytes):
    with open(path) as f:
        for line in f:
            m = MD.match(line.strip())
            if m and int(m.group(2)) * UNITS[m.group(3)] >= min_bytes:
                rows.append((coll, int(m.group(2)) * UNITS[m.group(3)], m.group(5), m.group(4)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="round logs (all.log) or knob-sweep markdown (.md)")
    p.add_argument("--ranks", type=int, required=True, help="the GPUs the runs had")
    p.add_argument("--collective", default="AllReduce", help="the knob sweep's collective (its table does not say)")
    p.add_argument("--min-bytes", type=int, default=64 << 10)
    p.add_argument("--no-header", action="store_true")
    a = p.parse_args()
    rows = []
    for path in a.files:
        (from_md(path, a.collective, rows, a.min_bytes) if path.endswith(".md") else from_log(path, a.ranks, rows, a.min_bytes))
    seen, out = set(), []
    for r in rows:  # the first time of a candidate and size counts
        if r[:3] not in seen:
            seen.add(r[:3])
            out.append(r)
    if not out:
        print(f"bench_log_csv.py: no plan times from {a.min_bytes} bytes in {' '.join(a.files)}", file=sys.stderr)
        return 1
    write_rows(a.ranks, out, header=not a.no_header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
