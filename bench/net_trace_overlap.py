#!/usr/bin/env python3
"""How the network path's stages overlap, from the WEFT_NET_TRACE files of the ranks of one
run (docs/port-channels.md, "Tracing the network path"): for each direction between two ranks,
every message's time from the sender proxy's `take` of its put trigger to the receiver proxy
seeing it land (`watch` of the posted counter), how many were in flight at once, and the
stages around the wire (the receiving kernel reading a slot: land to its ack's `take`; the ack
back: that `take` to the sender's `watch` of the acked counter).

Usage: bench/net_trace_overlap.py PREFIX.proxy_of_rank_*.tsv
Assumes the layout of WEFT_EMULATE_NODES=2 on 2 ranks (net/net_fifos.hpp): one peer across,
connection k's data channel 2k and ack channel 2k + 1; watch labels 2k (posted) and 2k + 1
(acked). Prints one line per direction; asserts nothing."""
import re
import statistics
import sys
from collections import defaultdict


def load(path):
    takes = defaultdict(list)    # channel -> [(t, bytes)] in order
    watches = defaultdict(list)  # label -> [(t, value)]
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) < 5:
            continue
        t, ev, ch, a, b = int(f[0]), f[1], int(f[2]), int(f[3]), int(f[4])
        if ev == "take":
            takes[ch].append((t, b))
        elif ev == "watch":
            watches[ch].append((t, a))
    return takes, watches


def arrivals(watch):
    """[(t, v)] of a counter -> time each count 1..max was first seen."""
    out = {}
    for t, v in watch:
        for n in range(len(out) + 1, v + 1):
            out[n] = t
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def direction(src, dst, name):
    s_takes, s_watch = src
    d_takes, d_watch = dst
    conns = sorted(c // 2 for c in s_takes if c % 2 == 0)
    lat, read, back, events, total = [], [], [], [], 0
    for k in conns:
        landed = arrivals(d_watch.get(2 * k, []))
        acked = arrivals(s_watch.get(2 * k + 1, []))
        acks = d_takes.get(2 * k + 1, [])
        for n, (t, size) in enumerate(s_takes[2 * k], start=1):
            if n not in landed:
                continue
            total += size
            lat.append(landed[n] - t)
            events += [(t, 1), (landed[n], -1)]
            if n <= len(acks):
                read.append(acks[n - 1][0] - landed[n])
                if n in acked:
                    back.append(acked[n] - acks[n - 1][0])
    if not lat:
        print("# %s: no message matched (is this a WEFT_EMULATE_NODES=2 run on 2 ranks?)" % name)
        return
    events.sort()
    span = (events[-1][0] - events[0][0]) * 1e-9
    level, peak, area, last = 0, 0, 0.0, events[0][0]
    for t, d in events:
        area += level * (t - last)
        last = t
        level += d
        peak = max(peak, level)
    us = lambda ns: ns / 1e3
    print("# %s: %d messages, %.1f MiB in %.3f s (%.2f GB/s while any was in flight); take->landed median %.0f us, "
          "p90 %.0f us; in flight at once: mean %.1f, max %d; receiver kernel (landed->ack take) median %.0f us; "
          "ack back (ack take->acked seen) median %.0f us" %
          (name, len(lat), total / 2**20, span, total / span / 1e9 if span > 0 else 0, us(statistics.median(lat)),
           us(pct(lat, 0.9)), area / (span * 1e9) if span > 0 else 0, peak,
           us(statistics.median(read)) if read else 0, us(statistics.median(back)) if back else 0))


def main(paths):
    ranks = {}
    for p in paths:
        m = re.search(r"rank_(\d+)\.\d+\.tsv$", p)
        if m:
            ranks[int(m.group(1))] = load(p)
    if len(ranks) != 2:
        print("# net_trace_overlap: need the trace files of exactly 2 ranks, got %d (%s)" % (len(ranks), " ".join(paths)))
        return 1
    a, b = sorted(ranks)
    direction(ranks[a], ranks[b], "rank %d -> rank %d" % (a, b))
    direction(ranks[b], ranks[a], "rank %d -> rank %d" % (b, a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
