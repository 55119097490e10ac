#!/usr/bin/env python3
"""Compares two torch_check.py results (weft, NCCL): both must pass, and the DDP model must
follow the same trajectory (loss and parameter digests per step, relative 1e-5).

Usage: torch_compare.py WEFT.json NCCL.json   (exit 0 when they agree)
"""
import json
import sys


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    w, n = (json.load(open(p)) for p in sys.argv[1:3])
    problems = []
    if not w.get("ok"):
        problems.append("the weft run failed its own checks")
    if not n.get("ok"):
        problems.append("the NCCL run failed its own checks")
    for r, (rw, rn) in enumerate(zip(w.get("ranks", []), n.get("ranks", []))):
        sw, sn = rw.get("ddp", []), rn.get("ddp", [])
        if len(sw) != len(sn) or not sw:
            problems.append(f"rank {r}: DDP steps differ in number ({len(sw)} vs {len(sn)})")
            continue
        for i, (a, b) in enumerate(zip(sw, sn)):
            for k in ("loss", "sum", "abs_sum"):
                if not close(a[k], b[k]):
                    problems.append(f"rank {r} step {i}: {k} {a[k]!r} (weft) vs {b[k]!r} (NCCL)")
    for p in problems:
        print("  DIFF", p)
    print("torch_compare: weft and NCCL " + ("agree" if not problems else f"differ ({len(problems)} problems)"))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
