#!/usr/bin/env python3
"""Flags PTX that reads or writes a kernel parameter through a generic address.

usage: check_ptx_param_loads.py FILE.ptx [FILE.ptx...]

A register loaded with a parameter's symbol (`mov.b64 %rd1, kernel_param_0;`) holds a
parameter-space address. Only `ld.param` may use it; a generic `ld` / `st` through it (or
through a register derived from it by `add`) reads whatever lies at that small address. nvcc
13.0 emitted such a load for `check ? *volatile_ptr : a.field` (the copy-engine rendezvous
kernel's fault of the 2026-11-28 round, docs/results-2026-11-28.md). `cvta.param` makes a
proper generic address and is fine. Exit 0 when nothing is found, 1 otherwise, 2 on bad use.
"""
import re
import sys

MOV = re.compile(r"^\s*mov\.b64\s+(%rd\d+),\s*([\w$.]+_param_\d+)\s*;")
ADD = re.compile(r"^\s*add\.(?:s64|u64)\s+(%rd\d+),\s*(%rd\d+),\s*(-?\d+|%rd\d+)\s*;")
MEM = re.compile(r"^\s*(ld|st|atom|red)((?:\.\w+)*)\s+.*\[(%rd\d+)(?:\+-?\d+)?\]")
FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
SPACES = {"param", "global", "shared", "local", "const"}


def check(path):
    bad = []
    func, tainted = "?", {}
    for n, line in enumerate(open(path, errors="replace"), 1):
        m = FUNC.match(line)
        if m:
            func, tainted = m.group(1), {}
            continue
        m = MOV.match(line)
        if m:
            tainted[m.group(1)] = m.group(2)
            continue
        m = ADD.match(line)
        if m:
            dst, src = m.group(1), m.group(2)
            if src in tainted:
                tainted[dst] = tainted[src]
            else:
                tainted.pop(dst, None)
            continue
        m = MEM.match(line)
        if m:
            quals = set(m.group(2).strip(".").split(".")) if m.group(2) else set()
            if m.group(3) in tainted and not (quals & SPACES):
                bad.append("%s:%d: in %s: a generic %s through %s, the address of parameter %s: %s"
                           % (path, n, func, m.group(1), m.group(3), tainted[m.group(3)], line.strip()))
            continue
        # Any other write to a tainted register ends the taint (conservatively, by its first operand).
        w = re.match(r"^\s*[a-z][\w.]*\s+(%rd\d+),", line)
        if w and w.group(1) in tainted:
            tainted.pop(w.group(1))
    return bad


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    bad = []
    for p in argv[1:]:
        try:
            bad += check(p)
        except OSError as e:
            sys.stderr.write("check_ptx_param_loads.py: %s\n" % e)
            return 2
    for b in bad:
        print(b)
    print("%d generic access(es) through parameter addresses in %d file(s)" % (len(bad), len(argv) - 1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
