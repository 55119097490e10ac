#!/usr/bin/env bash
# The partitioned-communication round (paper 002 §VI) in one go, on a machine with GPUs:
#   bench/part_round.sh [build dir] [output file]
# Runs part_bench's four tables with two ranks (one per GPU; with one GPU both ranks share
# it and every table says so). Needs a build with CUDA and -DWEFT_BUILD_BENCH=ON. goodput
# runs three times: within the host, then with WEFT_EMULATE_NODES=2 (its progression-engine
# column over UCX between the two emulated nodes: paper 002 Figure 5's inter-node case), then
# the same with staging through page-locked memory forced (WEFT_PART_STAGE=1).
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
  shared=""
  [[ $(nvidia-smi -L | wc -l) -lt 2 ]] && shared=", both ranks on one GPU (correctness, not speed)"
  echo "# goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2$shared): prox_* over UCX between the nodes, staged"
  echo "# through page-locked memory where UCX cannot register GPU memory; trad crosses the nodes too, part stays within the host"
  WEFT_EMULATE_NODES=2 "$bin" goodput || echo "# (goodput across emulated nodes failed; see above)"
  echo "# goodput across 2 emulated nodes, staging forced (WEFT_PART_STAGE=1$shared)"
  WEFT_EMULATE_NODES=2 WEFT_PART_STAGE=1 "$bin" goodput --grids 1,64,256,1024,4096,32768 ||
    echo "# (staged goodput across emulated nodes failed; see above)"
  "$bin" allreduce --grids 1024,2048,4096,8192,16384,32768
} 2>&1 | tee "$out"
