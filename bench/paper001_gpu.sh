#!/usr/bin/env bash
# Paper 001's comparison on real GPUs (issue 20, item 4): HPDS against round-robin and
# algorithm-level execution, each plan run by the GPU runtime and simulated beside it.
#
#   bench/paper001_gpu.sh [BUILD_DIR] [OUT_DIR]
#
# Uses every GPU of the machine (N = nvidia-smi's count, at least 2). The hierarchical
# algorithms are compiled with logical nodes of G = WEFT_GPUS_PER_NODE GPUs (default N/2, so
# 8 GPUs run HM as 2 x 4); until the inter-node transport exists every transfer still goes
# over NVLink (docs/runtime.md), so the runs measure the schedules, not a NIC. Each plan is
# compiled for the preset h200-1xN with GPUPerNode=G (weft compile -o), run with
# WEFT_ALGO=COLL:plan.json by `weft bench` (NCCL off), and simulated on the same topology.
# Writes OUT_DIR/<algorithm>-<scheduler>.{json,gpu.jsonl,sim.jsonl} and prints one table.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-paper001-gpu}
WEFT="$BUILD/bin/weft"
[ -x "$WEFT" ] || { echo "paper001_gpu.sh: $WEFT not found (build the weft target first)" >&2; exit 2; }
N=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$N" -ge 2 ] || { echo "paper001_gpu.sh: needs at least 2 GPUs, found $N" >&2; exit 2; }
G=${WEFT_GPUS_PER_NODE:-$((N / 2))}
TOPO="h200-1x$N"
SIZES=${SIZES:-32M:1G}
mkdir -p "$OUT"
for algo in hm_allreduce hm_allgather ring_allreduce; do
  case $algo in *allgather) coll=AllGather ;; *) coll=AllReduce ;; esac
  for sched in hpds rr algo; do
    base="$OUT/$algo-$sched"
    "$WEFT" compile "$algo" -t "$TOPO" -p "GPUPerNode=$G" -s "$sched" --json -o "$base.json" > "$base.compile.json"
    WEFT_ALGO="$coll:$base.json" WEFT_GPUS_PER_NODE=$G \
      "$WEFT" bench "$coll" --sizes "$SIZES" --factor 4 --no-nccl --json > "$base.gpu.jsonl"
    "$WEFT" simulate "$base.json" -t "$TOPO" --sizes "$SIZES:4" --json > "$base.sim.jsonl"
  done
done
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
print("| algorithm | scheduler | size | GPU busbw (GB/s) | simulated busbw (GB/s) |")
print("| --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(os.path.join(out, "*.gpu.jsonl"))):
    base = path[: -len(".gpu.jsonl")]
    algo, sched = os.path.basename(base).rsplit("-", 1)
    sim = {}
    for line in open(base + ".sim.jsonl"):
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        sim[d["bytes"]] = d["busbw_GBps"]
    for line in open(path):
        if not line.startswith("{"):
            continue  # comment lines (the bench's header)
        d = json.loads(line)
        size = d.get("bytes", d.get("size"))
        gpu = d.get("busbw_GBps", d.get("busbw"))
        print(f"| {algo} | {sched} | {size} | {gpu} | {sim.get(size, '-')} |")
EOF
