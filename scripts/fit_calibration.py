#!/usr/bin/env python3
"""Fits the simulator's runtime figures to measured candidate times.

The fixtures (tests/data/calibration/*.csv: tune-h200x4.csv made by scripts/tune_log_csv.py
from a `weft tune` round log, bench-h200x2.csv by scripts/bench_log_csv.py from `weft bench`
logs) hold measured times per candidate and size. This runs `weft tune --simulate` on the
same collectives, ranks, sizes, instances and candidates with trial figures (--call-cost for
the runtime's call model), searches them coordinate by coordinate for the most training
times within 15% (issue 32's target; ties: the smallest median |error|), and prints the
before/after table per ranks, collective, size and protocol (Simple, LL and LL128).

Held out (never scored by the search, reported apart): every row of 2 ranks, and the 4-rank
rows at 2 MiB.

    scripts/fit_calibration.py build/bin/weft tests/data/calibration/*.csv [--no-search] [--before OLD_WEFT]

--no-search prints the table of the shipped figures (the "after" columns) against the
"before" ones: another binary's own figures with --before (an earlier model), else this
binary with the grids' first values.
"""
import argparse
import csv
import re
import statistics
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"weft tune: (\w+) (\d+) (B|KiB|MiB|GiB): candidate \d+ of \d+, (.*?): ([\d.]+) us; best")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# name, option, grid (the starting value is the first)
SEARCH = [
    ("simple_alpha_extra_us", "--call-cost", [3.5, 0, 1, 1.5, 2, 2.5, 3, 4, 4.5, 5, 6]),
    ("simple_rate_scale", "--call-cost", [1.5, 1.0, 1.1, 1.2, 1.3, 1.4, 1.6, 1.7, 1.8, 2.0]),
    ("ll_rate_scale", "--call-cost", [0.3, 0.15, 0.2, 0.25, 0.35, 0.4, 0.5, 0.6]),
    ("ll_latency_scale", "--call-cost", [2.0, 0.5, 1, 1.5, 2.5, 3, 4]),
    ("ll128_rate_scale", "--call-cost", [1.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.2, 1.5]),
    ("ll128_latency_scale", "--call-cost", [1.0, 0.5, 1.5, 2, 2.5, 3, 4]),
    ("nvlink_gamma", "--call-cost", [0.15, 0, 0.02, 0.05, 0.1]),
]

def protocol(cand):
    m = re.search(r", (Simple|LL128|LL),", cand)
    return m.group(1) if m else "?"


def load_fixture(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                rows[(int(r["ranks"]), r["collective"], int(r["bytes"]), r["candidate"])] = float(r["measured_us"])
    return rows


def simulate(weft, rows, figures):
    out = {}
    for ranks in sorted({k[0] for k in rows}):
        keys = [k for k in rows if k[0] == ranks]
        colls = sorted({k[1] for k in keys})
        sizes = sorted({k[2] for k in keys})
        factor = min([b // a for a, b in zip(sizes, sizes[1:])] or [2])
        algos = sorted({k[3].split(" ")[0] for k in keys})
        insts = sorted({int(re.search(r", x(\d+)\)$", k[3]).group(1)) for k in keys})
        cmd = [weft, "tune", *colls, "--simulate", "--ranks", str(ranks), "--sizes", f"{sizes[0]}:{sizes[-1]}",
               "--factor", str(factor), "--instances", ",".join(map(str, insts)), "--protocols", "Simple,LL,LL128",
               "-a", ",".join(algos)]
        for opt in ("--call-cost", "--cost"):
            kv = ",".join(f"{n}={v}" for n, (o, v) in figures.items() if o == opt)
            if kv:
                cmd += [opt, kv]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"fit_calibration.py: {' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")
        for line in p.stderr.splitlines():
            m = LINE.search(line)
            if m:
                out[(ranks, m.group(1), int(m.group(2)) * UNITS[m.group(3)], m.group(4))] = float(m.group(5))
    return out


def errors(rows, sim, protos=("Simple", "LL", "LL128")):
    return {k: sim[k] / us - 1 for k, us in rows.items() if k in sim and protocol(k[3]) in protos}


def held_out(key):
    """Rows the fit never sees: every row of 2 ranks, and the 4-rank rows at 2 MiB."""
    return key[0] == 2 or key[2] == 2 << 20


def score(errs, rows_wanted=lambda k: not held_out(k)):
    """(rows within 15%, -median |error|) over the training rows (or `rows_wanted`)."""
    e = [x for k, x in errs.items() if rows_wanted(k)]
    return (sum(abs(x) <= 0.15 for x in e), -statistics.median(abs(x) for x in e))


def describe(errs):
    parts = []
    for name, want in (("training", lambda k: not held_out(k)), ("held out, 4 ranks", lambda k: k[0] == 4 and held_out(k)),
                       ("held out, 2 ranks", lambda k: k[0] == 2)):
        e = [x for k, x in errs.items() if want(k)]
        if e:
            parts.append(f"{name}: {sum(abs(x) <= 0.15 for x in e)} of {len(e)} within 15%, "
                         f"median |error| {statistics.median(abs(x) for x in e) * 100:.1f}%")
    return "; ".join(parts)


def table(rows, before, after):
    groups = defaultdict(list)
    for k, us in rows.items():
        if k in before and k in after:
            groups[(k[0], k[1], k[2], protocol(k[3]))].append((before[k] / us - 1, after[k] / us - 1))
    print("| ranks | collective | size | protocol | candidates | median error before | within 15% before | median error after | within 15% after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    tot = defaultdict(lambda: [0, 0, 0])
    for g in sorted(groups):
        b = [x[0] for x in groups[g]]
        a = [x[1] for x in groups[g]]
        wb, wa = sum(abs(x) <= 0.15 for x in b), sum(abs(x) <= 0.15 for x in a)
        t = tot[(g[0], g[3])]
        t[0] += len(b); t[1] += wb; t[2] += wa
        size = f"{g[2] >> 20} MiB" if g[2] >= 1 << 20 else f"{g[2] >> 10} KiB"
        print(f"| {g[0]} | {g[1]} | {size} | {g[3]} | {len(b)} | {statistics.median(b) * 100:+.0f}% | {wb} | "
              f"{statistics.median(a) * 100:+.0f}% | {wa} |")
    print()
    for (ranks, proto), (n, wb, wa) in sorted(tot.items()):
        print(f"{ranks} ranks, {proto}: {wb} of {n} candidate times within 15% before, {wa} after.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weft")
    ap.add_argument("fixture", nargs="+")
    ap.add_argument("--no-search", action="store_true", help="no search: the table of the 'before' figures against the shipped ones")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--before", metavar="WEFT", help="another weft binary (an earlier model) for the table's 'before' "
                    "columns, run with its own shipped figures (default: this one with the grids' first values)")
    a = ap.parse_args()
    rows = load_fixture(a.fixture)
    # The grids' first values start the search.
    start = {n: (o, g[0]) for n, o, g in SEARCH}
    base = simulate(a.before, rows, {}) if a.before else simulate(a.weft, rows, start)
    shipped = simulate(a.weft, rows, {})
    print(f"before: {describe(errors(rows, base))}", file=sys.stderr)
    print(f"shipped figures: {describe(errors(rows, shipped))}", file=sys.stderr)
    if a.no_search:
        table(rows, base, shipped)
        return 0
    best, best_score = dict(start), score(errors(rows, simulate(a.weft, rows, start)))
    for _ in range(a.passes):
        for n, o, grid in SEARCH:
            for v in grid:
                trial = dict(best)
                trial[n] = (o, v)
                s = score(errors(rows, simulate(a.weft, rows, trial)))
                if s > best_score:
                    best, best_score = trial, s
                    print(f"  {n}={v}: {s[0]} training rows within 15%, median |error| {-s[1] * 100:.1f}%", file=sys.stderr)
    print("fitted: " + ", ".join(f"{n}={v}" for n, (o, v) in best.items()))
    after = simulate(a.weft, rows, best)
    print(f"fitted figures: {describe(errors(rows, after))}", file=sys.stderr)
    table(rows, base, after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
