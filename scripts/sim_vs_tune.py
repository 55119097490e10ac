#!/usr/bin/env python3
"""The simulator against measured `weft tune` times, candidate by candidate.

`weft tune` prints one progress line per candidate and size on standard error ("weft tune:
AllReduce 2 MiB: candidate 9 of 61, allpairs (hand-built, Simple, x24): 47.72 us; best ...").
Given such lines from a GPU run (a round's all.log holds them) and from `weft tune --simulate`
with the same collectives, ranks, sizes and candidates, this prints per collective and size
the simulator's median error (simulated / measured - 1) and how many candidates it predicts
within 15%, the calibration target of issue 32. Candidates only one side timed are left out
(the simulator skips the one-shot kernel and the incumbent; pruned candidates lack large sizes).

    scripts/sim_vs_tune.py MEASURED.log SIMULATED.log [--protocol Simple]
"""
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"weft tune: (\w+) (\d+ (?:B|KiB|MiB|GiB)): candidate \d+ of \d+, (.*?): ([\d.]+) us; best")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def load(path):
    times = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                times[(m.group(1), m.group(2), m.group(3))] = float(m.group(4))
    return times


def size_bytes(text):
    n, unit = text.split()
    return int(n) * UNITS[unit]


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    proto = None
    if "--protocol" in argv:
        proto = argv[argv.index("--protocol") + 1]
        args.remove(proto)
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    measured, simulated = load(args[0]), load(args[1])
    errors = defaultdict(list)
    for key, us in measured.items():
        if key in simulated and us > 0 and (proto is None or f", {proto}," in key[2]):
            errors[(key[0], key[1])].append(simulated[key] / us - 1)
    if not errors:
        print("sim_vs_tune.py: no candidate timed on both sides", file=sys.stderr)
        return 1
    print("| collective | size | candidates | median error | within 15% |")
    print("| --- | --- | --- | --- | --- |")
    total = within = 0
    for (coll, size) in sorted(errors, key=lambda k: (k[0], size_bytes(k[1]))):
        es = errors[(coll, size)]
        w = sum(1 for e in es if abs(e) <= 0.15)
        total += len(es)
        within += w
        print(f"| {coll} | {size} | {len(es)} | {statistics.median(es) * 100:+.0f}% | {w} |")
    print(f"\n{within} of {total} candidate times within 15%.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
