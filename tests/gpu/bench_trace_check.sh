#!/usr/bin/env bash
# `weft bench --trace` on GPUs (docs/traces.md): one traced AllReduce of 1 MiB on 2 ranks
# (sharing one GPU where there is one) writes a Chrome trace with records from both ranks
# and every thread block the row ran, the simulator's figures beside them, and the plot.
# Exits 77 (skipped) without a GPU. Usage: bench_trace_check.sh WEFT_BINARY
set -u
weft=$1
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "no GPU: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$weft" bench AllReduce --ranks 2 --sizes 1M:1M --trace "$dir/out.json" --no-nccl --warmup 2 --iters 5 --json \
  >"$dir/rows.txt" 2>"$dir/err.txt"
rc=$?
cat "$dir/rows.txt" "$dir/err.txt"
[ $rc -eq 0 ] || { echo "FAIL: weft bench exited $rc"; exit 1; }
[ -s "$dir/out.svg" ] || { echo "FAIL: no plot $dir/out.svg"; exit 1; }
python3 - "$dir/out.json" "$dir/rows.txt" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
row = next(json.loads(l) for l in open(sys.argv[2]) if l.startswith('{"collective"'))
tracks = {}
for e in trace["traceEvents"]:
    if e["ph"] == "X":
        tracks.setdefault(e["pid"], set()).add(e["tid"])
other = trace["otherData"]
assert other["measured"] is True, other
assert sorted(tracks) == [0, 1], f"ranks with records: {sorted(tracks)}"
per_rank = row["weft_tbs"] if row["weft_tbs"] > 0 else None  # rank 0's launch
for pid, tids in tracks.items():
    assert per_rank is None or len(tids) == per_rank, f"rank {pid}: records from {len(tids)} blocks of {per_rank}"
    assert tids == set(range(len(tids))), f"rank {pid}: blocks {sorted(tids)}"
assert other["dropped_records"] == 0, other["dropped_records"]
assert len(other["tbs"]) == sum(len(t) for t in tracks.values())
assert 0 <= other["tb_idle_mean"] <= 1
assert row["sim_us"] is not None and row["sim_us"] > 0, row
assert "simulated" in other, "no simulated figures beside the measured ones"
print(f"OK: {sum(len(t) for t in tracks.values())} blocks on 2 ranks, idle {other['tb_idle_mean']:.3f} "
      f"(simulated {other['simulated']['tb_idle_mean']:.3f}), clocks {other['clocks']}")
PY
