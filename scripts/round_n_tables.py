#!/usr/bin/env python3
"""Turns the files of tests/gpu/run_round_n.sh into markdown: nccl-tests' time on the
machine's NCCL divided by the time on weft (above 1: weft is faster), per collective and
size, plain and in CUDA graphs, with busbw and #wrong; the small AllReduce of the new bundle
against the base bundle (`weft bench`); HM against the compiled ring; the steps.

Usage: round_n_tables.py ROUND_DIR [ROUND_DIR...] [--out FILE]
  ROUND_DIR  a round's $OUT as fetched (summary.txt, bench.csv, nccltests.log; any may be
             missing). Several: a round's --part 1 and --part 2 calls; a later folder's rows
             replace an earlier one's of the same key.
  --out      write the markdown there instead of standard output

Standard library only; a row it cannot read is skipped and counted under the tables.
"""
import csv
import os
import re
import statistics
import sys

NT_ORDER = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]
SECTION = re.compile(r"^######## (weft|nccl) (\S+) (\S+) (plain|graph|r1|r2|zero|eff)\b")
EXTRA = {"r1": "registered buffers (-R 1)", "r2": "symmetric windows (-R 2)",
         "zero": "NCCL_CTA_POLICY=2 with symmetric windows (-R 2)", "eff": "NCCL_CTA_POLICY=1"}


def fmt_size(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return "%d %s" % (b // scale, unit)
    return "%d B" % b


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def ratio(a, b):
    return a / b if a is not None and b else None


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


class Round:
    """Everything the round folders hold, merged."""

    def __init__(self, folders):
        self.skipped = 0
        self.summary = []  # lines, in folder order
        self.nt = {}  # (lib, test, variant) -> {size: row dict}
        self.nt_mode = {}  # (lib, test, variant) -> "mpi4"
        self.bench = {}  # (step, bundle, rep, mode, collective, bytes) -> row dict
        for f in folders:
            self.summary += (read(f, "summary.txt") or "").splitlines()
            self.load_nt(read(f, "nccltests.log") or "")
            self.load_bench(read(f, "bench.csv"))

    def load_nt(self, text):
        key, rows = None, None
        for line in text.splitlines():
            m = SECTION.match(line)
            if m:
                key = (m.group(1), m.group(3), m.group(4))
                rows = self.nt[key] = {}
                self.nt_mode[key] = m.group(2)
                continue
            if rows is None or not re.match(r"^\s*\d+\s+\d+\s", line):
                continue
            f = line.split()
            if len(f) < 13:
                self.skipped += 1
                continue
            size = int(f[0])
            if size in rows:  # two rows of one size (0 B after rounding): keep the first
                continue
            rows[size] = {"us": num(f[5]), "busbw": num(f[7]), "wrong": wrong(f[8]) + wrong(f[12]),
                          "ip_us": num(f[9]), "ip_busbw": num(f[11])}

    def load_bench(self, text):
        if text is None:
            return
        for r in csv.DictReader(text.splitlines()):
            try:
                key = (r["step"], r["bundle"], int(r["rep"]), r["mode"], r["collective"], int(r["bytes"]))
            except (KeyError, ValueError, TypeError):
                self.skipped += 1
                continue
            d = {k: num(r.get(k)) for k in ("weft_us", "weft_busbw", "weft_wrong", "weft_tbs", "nccl_us", "nccl_wrong")}
            if not d["nccl_us"]:  # the bench writes 0 us for a side it did not run
                d["nccl_us"] = d["nccl_wrong"] = None
            self.bench[key] = d

    def tests(self, variant):
        have = {t for (_, t, v) in self.nt if v == variant}
        return [t for t in NT_ORDER if t in have] + sorted(have - set(NT_ORDER))


def wrong(s):
    v = num(s)
    return int(v) if v is not None else 0


def read(folder, name):
    p = os.path.join(folder, name)
    if not os.path.isfile(p):
        return None
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()


def steps_table(rnd):
    rows = []
    for line in rnd.summary:
        m = re.match(r"^(\S+)\s+rc=(\d+\(timeout \d+s\)|\S+)\s+([\d.]+)s\s+(.*)$", line)
        if m:
            rows.append([m.group(1), m.group(2), m.group(3), m.group(4).replace("|", "\\|")])
            continue
        m = re.match(r"^(\S+)\s+(NOT RUN.*|skipped.*)$", line)
        if m:
            rows.append([m.group(1), "-", "-", m.group(2)])
    head = [l for l in rnd.summary if l.startswith(("machine:", "links:", "NCCL:", "bundle:", "elapsed:", "FAIL"))]
    if not rows and not head:
        return "summary.txt is missing: the round did not run or was not fetched."
    return "\n".join(head) + "\n\n" + table(["step", "exit", "seconds", "last line"], rows)


def nt_sizes(rnd, test):
    return sorted({s for (l, t, v), rows in rnd.nt.items() if t == test for s in rows})


def nt_row(rnd, lib, test, variant, size):
    return rnd.nt.get((lib, test, variant), {}).get(size, {})


def collective_table(rnd, test):
    rows = []
    for s in nt_sizes(rnd, test):
        cells = [fmt_size(s)]
        for variant in ("plain", "graph"):
            n, w = nt_row(rnd, "nccl", test, variant, s), nt_row(rnd, "weft", test, variant, s)
            cells += [fmt(n.get("us")), fmt(w.get("us")), fmt(ratio(n.get("us"), w.get("us")))]
        n, w = nt_row(rnd, "nccl", test, "plain", s), nt_row(rnd, "weft", test, "plain", s)
        wrongs = [sum(nt_row(rnd, lib, test, v, s).get("wrong", 0) for v in ("plain", "graph")) for lib in ("weft", "nccl")]
        cells += [fmt(n.get("busbw")), fmt(w.get("busbw")), "%d / %d" % tuple(wrongs)]
        rows.append(cells)
    return table(["size", "NCCL us", "weft us", "NCCL/weft", "graph NCCL us", "graph weft us", "graph NCCL/weft",
                  "NCCL busbw", "weft busbw", "#wrong weft / NCCL"], rows)


def extra_table(rnd, variant, tests):
    rows = []
    for t in [x for x in NT_ORDER if x in tests] + sorted(set(tests) - set(NT_ORDER)):
        sizes = sorted(set(rnd.nt.get(("weft", t, variant), {})) | set(rnd.nt.get(("nccl", t, variant), {})))
        for s in sizes:
            n, w = nt_row(rnd, "nccl", t, variant, s), nt_row(rnd, "weft", t, variant, s)
            rows.append([t, fmt_size(s), fmt(n.get("busbw")), fmt(w.get("busbw")), fmt(ratio(w.get("busbw"), n.get("busbw"))),
                         fmt(n.get("ip_busbw")), fmt(w.get("ip_busbw")), fmt(ratio(w.get("ip_busbw"), n.get("ip_busbw"))),
                         "%d" % w.get("wrong", 0) if w else "-"])
    return table(["test", "size", "NCCL busbw", "weft busbw", "weft/NCCL", "NCCL in place", "weft in place",
                  "weft/NCCL in place", "weft #wrong"], rows)


def overview(rnd, variant):
    tests = rnd.tests(variant)
    if not tests:
        return "No nccl-tests rows (%s)." % variant
    sizes = sorted({s for t in tests for s in nt_sizes(rnd, t)})
    rows, wins, cells = [], 0, 0
    for s in sizes:
        row = [fmt_size(s)]
        for t in tests:
            r = ratio(nt_row(rnd, "nccl", t, variant, s).get("us"), nt_row(rnd, "weft", t, variant, s).get("us"))
            row.append(fmt(r))
            if r is not None:
                cells += 1
                wins += r >= 1.0
        rows.append(row)
    return table(["size"] + tests, rows) + "\n\nweft at least as fast as NCCL in %d of %d cells." % (wins, cells)


def small_table(rnd, mode):
    keys = [k for k in rnd.bench if k[0].startswith("small_") and k[3] == mode]
    if not keys:
        return "No small-message rows (%s)." % mode
    sizes = sorted({k[5] for k in keys})
    have_base = any(k[1] == "base" for k in keys)
    rows = []
    for b in sizes:
        runs = {side: [rnd.bench[k] for k in sorted(keys) if k[1] == side and k[5] == b] for side in ("base", "new")}
        us = {side: [r["weft_us"] for r in runs[side] if r["weft_us"]] for side in runs}
        nccl = [r["nccl_us"] for side in runs for r in runs[side] if r["nccl_us"]]
        mean = {side: statistics.mean(us[side]) if us[side] else None for side in us}
        wrongs = sum(int(r["weft_wrong"] or 0) for side in runs for r in runs[side] if (r["weft_wrong"] or 0) > 0)
        row = [fmt_size(b)]
        if have_base:
            row += [" / ".join("%.2f" % v for v in us["base"]) or "-"]
        row += [" / ".join("%.2f" % v for v in us["new"]) or "-"]
        if have_base:
            row += [fmt(ratio(mean["base"], mean["new"]))]
        row += [fmt(statistics.median(nccl) if nccl else None), fmt(ratio(statistics.median(nccl) if nccl else None, mean["new"])),
                str(wrongs)]
        rows.append(row)
    header = ["size"] + (["base us (runs)"] if have_base else []) + ["new us (runs)"] + (["base/new"] if have_base else [])
    return table(header + ["NCCL us (median)", "NCCL/new", "#wrong"], rows)


def hm_table(rnd):
    steps = sorted({k[0] for k in rnd.bench if k[0].startswith("hm_") or k[0] == "ring_compiled"},
                   key=lambda s: (s == "ring_compiled", s))
    if not steps:
        return "HM and ring were not run."
    sizes = sorted({k[5] for k in rnd.bench if k[0] in steps})
    rows = []
    for b in sizes:
        row = [fmt_size(b)]
        for st in steps:
            r = next((v for k, v in rnd.bench.items() if k[0] == st and k[5] == b), {})
            row += [fmt(r.get("weft_busbw")), fmt(r.get("weft_tbs"), "%.0f")]
        rows.append(row)
    header = ["size"]
    for st in steps:
        header += [("HM " + st[3:]) if st.startswith("hm_") else "ring (compiled)", "TBs"]
    return table(header, rows)


def render(rnd, names):
    parts = ["<!-- generated by scripts/round_n_tables.py from %s -->" % ", ".join(names), "",
             "### Steps", "", steps_table(rnd), ""]
    for t in NT_ORDER + sorted({t for (_, t, _) in rnd.nt} - set(NT_ORDER)):
        if nt_sizes(rnd, t):
            parts += ["### nccl-tests %s: NCCL time / weft time (out of place, us)" % t, "", collective_table(rnd, t), ""]
    parts += ["### HM AllReduce against the compiled ring (busbw GB/s, weft bench)", "", hm_table(rnd), ""]
    for mode in ("plain", "graph"):
        parts += ["### Small AllReduce, base bundle against new (weft bench, %s)" % mode, "", small_table(rnd, mode), ""]
    for variant in ("plain", "graph"):
        title = "in CUDA graphs (-G)" if variant == "graph" else "plain"
        parts += ["### nccl-tests, NCCL time / weft time, %s (above 1: weft faster)" % title, "", overview(rnd, variant), ""]
    for variant, title in EXTRA.items():
        tests = rnd.tests(variant)
        if tests:
            parts += ["### nccl-tests, %s: busbw GB/s, out of place and in place (weft/NCCL above 1: weft faster)" % title,
                      "", extra_table(rnd, variant, tests), ""]
    if rnd.skipped:
        parts += ["(%d unreadable rows skipped)" % rnd.skipped, ""]
    return "\n".join(parts)


def main(argv):
    args, out, folders = argv[1:], None, []
    i = 0
    while i < len(args):
        if args[i] == "--out" and i + 1 < len(args):
            out = args[i + 1]
            i += 2
            continue
        if args[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        if args[i].startswith("-") or not os.path.isdir(args[i]):
            sys.stderr.write("round_n_tables.py: '%s' is neither an option nor a round's folder\n" % args[i])
            return 2
        folders.append(args[i])
        i += 1
    if not folders:
        sys.stderr.write("usage: round_n_tables.py ROUND_DIR [ROUND_DIR...] [--out FILE]\n")
        return 2
    text = render(Round(folders), [os.path.basename(os.path.normpath(f)) for f in folders])
    if out is None:
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
