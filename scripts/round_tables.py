#!/usr/bin/env python3
"""Turns the files of a multi-GPU round (tests/gpu/run_round4.sh) into the markdown tables of
docs/results-h200x4.md: the GPU tests, weft against NCCL per collective (with and without CUDA
graphs, thread blocks, the simulator's prediction and its error), HM against ring for each
node shape, and nccl-tests on weft's NCCL-compatible library.

Usage: round_tables.py ROUND_DIR [--out FILE] [--expect FILE]
  ROUND_DIR  the round's $OUT as fetched: bench.csv (weft bench --csv rows with the step
             first), sim.jsonl (weft simulate --json rows with a tag), summary.txt,
             nccltests.log; any of them may be missing (its tables say "not run").
  --out      write the markdown there instead of standard output
  --expect   compare the output with FILE and exit 1 on a difference (the unit test)

Standard library only; never raises on malformed rows: a row it cannot read is skipped and
counted in a note under the tables.
"""
import csv
import difflib
import json
import math
import os
import re
import sys

COLLECTIVES = ["AllReduce", "AllGather", "ReduceScatter", "AllToAll"]
# What the runtime's selection table runs at N >= 3 ranks (selection.cpp), and the compiled
# algorithm the simulator predicts for it: the one-shot kernel while each rank sends at most
# 512 KiB in all (no plan: the simulator cannot run it, so its row shows all-pairs and no
# error), all-pairs over LL up to 128 KiB, ring over Simple above; AllToAll is all-pairs.
SMALL_LIMIT = 128 * 1024
ONESHOT_LIMIT = 512 * 1024


def oneshot_runs(coll, size, ranks):
    if coll not in ("AllReduce", "AllGather", "ReduceScatter") or not ranks or not 2 <= ranks <= 8:
        return False
    peer = size if coll == "AllReduce" else size // ranks
    return (ranks - 1) * peer <= ONESHOT_LIMIT


def default_sim_algorithm(coll, size):
    if coll == "AllToAll":
        return "alltoall_direct"
    return ("allpairs_" if size <= SMALL_LIMIT else "ring_") + coll.lower()


def fmt_size(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return "%d %s" % (b // scale, unit)
    return "%d B" % b


def fmt(v, spec="%.2f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec % v


def err_pct(sim, meas):
    if sim is None or meas is None or meas <= 0:
        return "-"
    e = int(round((sim - meas) / meas * 100.0))
    return "%+d%%" % e if e else "0%"


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


class Round:
    def __init__(self, folder):
        self.folder = folder
        self.skipped = 0
        self.bench = {}  # (step, collective, bytes) -> row dict
        self.sim = {}  # (tag, bytes) -> sim dict
        self.ranks = None
        self.load_bench()
        self.load_sim()
        self.summary = self.read("summary.txt")
        self.nccltests = self.read("nccltests.log")
        m = re.search(r"^machine: (\d+) x", self.summary or "", re.M)
        if self.ranks is None and m:
            self.ranks = int(m.group(1))

    def read(self, name):
        p = os.path.join(self.folder, name)
        if not os.path.isfile(p):
            return None
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read()

    def load_bench(self):
        text = self.read("bench.csv")
        if text is None:
            return
        for row in csv.DictReader(text.splitlines()):
            try:
                key = (row["step"], row["collective"], int(row["bytes"]))
                r = {k: num(row.get(k)) for k in ("weft_us", "weft_busbw", "weft_wrong", "weft_tbs",
                                                   "nccl_us", "nccl_busbw", "nccl_wrong", "nccl_tbs")}
            except (KeyError, ValueError, TypeError):
                self.skipped += 1
                continue
            for side in ("weft", "nccl"):  # the bench writes 0 us and #wrong -1 for a side it did not run
                if not r[side + "_us"]:
                    for k in ("_us", "_busbw", "_wrong", "_tbs"):
                        r[side + k] = None
            self.bench[key] = r

    def load_sim(self):
        text = self.read("sim.jsonl")
        if text is None:
            return
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
                key = (d["tag"], int(d["bytes"]))
            except (ValueError, KeyError, TypeError):
                self.skipped += 1
                continue
            if self.ranks is None and isinstance(d.get("ranks"), int):
                self.ranks = d["ranks"]
            self.sim[key] = d

    def sim_busbw(self, tag, size):
        d = self.sim.get((tag, size))
        return None if d is None or "busbw_GBps" not in d else num(d["busbw_GBps"])

    def sizes(self, step, coll):
        return sorted(b for (s, c, b) in self.bench if s == step and c == coll)

    def steps(self, prefix):
        return sorted({s for (s, _, _) in self.bench if s.startswith(prefix)})


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def tests_table(rnd):
    if rnd.summary is None:
        return "summary.txt is missing: the round did not run or was not fetched."
    rows = []
    for line in rnd.summary.splitlines():
        m = re.match(r"^(\S+)\s+rc=(\S+)\s+([\d.]+)s\s+(.*)$", line)
        if m and not re.match(r"^(bench|ring_compiled$|hm_\d+x\d+$|nccltests_)", m.group(1)):
            rows.append([m.group(1), m.group(2), m.group(3), m.group(4).replace("|", "\\|")])
        m = re.match(r"^(\S+)\s+(NOT RUN.*|skipped.*)$", line)
        if m:
            rows.append([m.group(1), "-", "-", m.group(2)])
    head = [l for l in rnd.summary.splitlines() if l.startswith(("machine:", "links:", "elapsed:"))]
    return "\n".join(head) + "\n\n" + table(["test", "exit", "seconds", "last line"], rows)


def bench_table(rnd, coll):
    sizes = rnd.sizes("bench", coll) or rnd.sizes("bench_graph", coll)
    if not sizes:
        return "No rows for %s (the bench step did not run or failed before its first row)." % coll
    rows = []
    for b in sizes:
        r = rnd.bench.get(("bench", coll, b), {})
        g = rnd.bench.get(("bench_graph", coll, b), {})
        ratio = (fmt(r["nccl_us"] / r["weft_us"]) if r.get("weft_us") and r.get("nccl_us") else "-")
        gratio = (fmt(g["nccl_us"] / g["weft_us"]) if g.get("weft_us") and g.get("nccl_us") else "-")
        oneshot = oneshot_runs(coll, b, rnd.ranks)
        algo = ("allpairs_" + coll.lower()) if oneshot else default_sim_algorithm(coll, b)
        tag = "%s@1x%d" % (algo, rnd.ranks) if rnd.ranks else None
        sim = rnd.sim_busbw(tag, b) if tag else None
        label = ("one-shot; sim " + algo) if oneshot else algo + (" (LL)" if b <= SMALL_LIMIT else "")
        wrong = "%s/%s" % (fmt(r.get("weft_wrong"), "%.0f"), fmt(r.get("nccl_wrong"), "%.0f"))
        rows.append([fmt_size(b), fmt(r.get("weft_us")), fmt(r.get("weft_busbw")), fmt(r.get("weft_tbs"), "%.0f"),
                     fmt(r.get("nccl_us")), fmt(r.get("nccl_busbw")), fmt(r.get("nccl_tbs"), "%.0f"), ratio,
                     fmt(g.get("weft_us")), fmt(g.get("nccl_us")), gratio, wrong,
                     label, fmt(sim), "n/a" if oneshot else err_pct(sim, r.get("weft_busbw"))])
    return table(["size", "weft us", "weft busbw", "TBs", "NCCL us", "NCCL busbw", "TBs", "NCCL/weft time",
                  "graph weft us", "graph NCCL us", "graph ratio", "#wrong w/n", "weft runs / simulated", "sim busbw",
                  "sim err"], rows)


def hm_table(rnd, coll):
    shapes = [s for s in rnd.steps("hm_") if not s.startswith("hm_tests")]
    # Largest node first: hm_1x4 before hm_2x2.
    shapes.sort(key=lambda s: -int(s.split("x")[-1]) if s.split("x")[-1].isdigit() else 0)
    steps = shapes + (["ring_compiled"] if rnd.steps("ring_compiled") else [])
    sizes = sorted({b for st in steps for b in rnd.sizes(st, coll)})
    if not sizes:
        return "No rows for %s (the HM and ring steps did not run)." % coll
    header = ["size"]
    for st in steps:
        name = ("HM " + st[3:]) if st.startswith("hm_") else "ring (compiled)"
        header += [name + " busbw", "TBs", "sim", "err"]
    header += ["built-in busbw", "NCCL busbw"]
    rows = []
    for b in sizes:
        row = [fmt_size(b)]
        for st in steps:
            r = rnd.bench.get((st, coll, b), {})
            if st.startswith("hm_"):
                tag = "hm_%s@%s" % (coll.lower(), st[3:])
            else:
                tag = "ring_%s@1x%d" % (coll.lower(), rnd.ranks or 0)
            sim = rnd.sim_busbw(tag, b)
            wrong = r.get("weft_wrong")
            mark = "" if not wrong else " (#wrong %d)" % wrong
            row += [fmt(r.get("weft_busbw")) + mark, fmt(r.get("weft_tbs"), "%.0f"), fmt(sim),
                    err_pct(sim, r.get("weft_busbw"))]
        base = rnd.bench.get(("bench", coll, b), {})
        row += [fmt(base.get("weft_busbw")), fmt(base.get("nccl_busbw"))]
        rows.append(row)
    return table(header, rows)


def nccltests_table(rnd):
    text = rnd.nccltests
    if not text or "########" not in text:
        return "nccl-tests did not run (no nccl-carry/ in the bundle, or the round ended first)."
    rows = []
    for sec in text.split("######## ")[1:]:
        lines = sec.splitlines()
        title = lines[0].split()
        if len(title) < 3:
            continue
        mode, test = title[1], title[2]
        data = [l.split() for l in lines[1:] if re.match(r"^\s+\d+\s+\d+\s", l)]
        data = [d for d in data if len(d) >= 13]
        wrong = 0
        for d in data:
            for i in (8, 12):
                v = num(d[i])
                wrong += int(v) if v is not None else 0
        bw = {int(d[0]): d[7] for d in data}
        lat = {int(d[0]): d[5] for d in data}
        avg = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", sec)
        lib = re.search(r"nccl-library=(\d+)", sec) or re.search(r"NCCL version ([\d.+a-z]+)", sec)
        rows.append([test, mode, str(len(data)), str(wrong), lat.get(8, "-"), bw.get(2097152, "-"),
                     bw.get(134217728, "-"), avg.group(1) if avg else "-", lib.group(1) if lib else "-"])
    return table(["test", "mode", "rows", "#wrong", "8 B us", "busbw 2 MiB", "busbw 128 MiB", "avg busbw",
                  "library"], rows)


def render(rnd):
    parts = ["<!-- generated by scripts/round_tables.py from %s -->" % os.path.basename(os.path.normpath(rnd.folder)),
             "", "### GPU tests", "", tests_table(rnd), ""]
    for coll in COLLECTIVES:
        parts += ["### %s: weft against NCCL" % coll, "", bench_table(rnd, coll), ""]
    for coll in ("AllReduce", "AllGather"):
        parts += ["### HM %s against ring" % coll, "", hm_table(rnd, coll), ""]
    parts += ["### nccl-tests on weft's libnccl.so.2", "", nccltests_table(rnd), ""]
    if rnd.skipped:
        parts += ["(%d unreadable rows skipped)" % rnd.skipped, ""]
    return "\n".join(parts)


def main(argv):
    args = argv[1:]
    out = expect = None
    folder = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--out", "--expect") and i + 1 < len(args):
            if a == "--out":
                out = args[i + 1]
            else:
                expect = args[i + 1]
            i += 2
            continue
        if a in ("-h", "--help"):
            print(__doc__)
            return 0
        if folder is not None or a.startswith("-"):
            sys.stderr.write("round_tables.py: unexpected argument '%s'\n" % a)
            return 2
        folder = a
        i += 1
    if folder is None or not os.path.isdir(folder):
        sys.stderr.write("round_tables.py: give the round's folder (ROUND_DIR); '%s' is not one\n" % folder)
        return 2
    text = render(Round(folder))
    if expect is not None:
        with open(expect, encoding="utf-8") as f:
            want = f.read()
        if want != text:
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), text.splitlines(True), expect, "generated"))
            return 1
        return 0
    if out is not None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
