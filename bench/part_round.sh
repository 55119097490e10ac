#!/usr/bin/env bash
# The partitioned-communication round (paper 002 §VI) in one go, on a machine with GPUs:
#   bench/part_round.sh [build dir] [output file]
# Runs part_bench's four tables with two ranks (one per GPU; with one GPU both ranks share
# it and every table says so). Needs a build with CUDA and -DWEFT_BUILD_BENCH=ON. goodput
# runs twice: within the host, then with WEFT_EMULATE_NODES=2 (its progression-engine column
# over UCX between the two emulated nodes: paper 002 Figure 5's inter-node case).
set -euo pipefail
build=${1:-build}
out=${2:-part_round.txt}
bin="$build/bin/part_bench"
[[ -x "$bin" ]] || { echo "no $bin: configure with -DWEFT_BUILD_BENCH=ON and build part_bench" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
{
  echo "# weft partitioned round, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr '\n' ' ')"
  "$bin" overheads
  "$bin" pready
  "$bin" goodput
  echo "# goodput with WEFT_EMULATE_NODES=2: prox_* over UCX between emulated nodes; trad and part within the host"
  WEFT_EMULATE_NODES=2 "$bin" goodput || echo "# (goodput across emulated nodes failed; see above)"
  "$bin" allreduce --grids 1024,2048,4096,8192,16384,32768
} 2>&1 | tee "$out"
