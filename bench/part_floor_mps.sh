#!/usr/bin/env bash
# Where a partitioned iteration's floor goes, on ONE GPU shared by the two ranks under CUDA
# MPS (both ranks' kernels resident at once): a diagnosis of the host side, not issue 28's
# two-GPU measurement. Within PART_FLOOR_BUDGET seconds (default 150), each step bounded:
#   1. part_bench goodput --grids 1,8,64,256 (the traditional sequence beside the partitioned
#      paths, same call)
#   2. part_bench trace --paths kernel --thresholds 0 (one transport partition: goodput's
#      part_us) at PART_FLOOR_GRIDS (default 1,8,64,256)
#   3. part_bench trace --paths proxy --thresholds -32 (ceil(blocks / 32): goodput's prox_us)
#      at the same grids
#   4. part_bench allreduce --grids PART_FLOOR_AR_GRIDS (default 2,8,32,64; grids above SMs / 2
#      are skipped by the bench with the ranks on one GPU; no NCCL column there, the bench says why)
# then the summary: goodput, the `floor` lines of both traces (mean us from the sender's start
# of an epoch to each step, on both ranks) and the AllReduce table. The whole output (every
# case's timeline, the last epoch's WEFT_PART_TRACE lines) goes to OUTPUT.
#
#   bash bench/part_floor_mps.sh [DIR] [OUTPUT]
# DIR holds bin/part_bench (a Release bundle of scripts/make_gpu_bundle.sh, or a build dir;
# default: the folder above this script when it holds bin/part_bench, else build); OUTPUT
# defaults to $OUT/part_floor.txt (the device tool's folder) or part_floor.txt.
# CUDA MPS is started here (pipe and log directories under /tmp) and stopped on exit; a step
# killed by its time limit restarts it before the next step (a client killed with work on the
# GPU can leave the server refusing every later one: part_bench's exit 4). WEFT_TIMEOUT
# defaults to 10 s, so a wait that cannot end fails inside the process, before any kill.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
if [[ $# -ge 1 ]]; then dir=$1
elif [[ -x "$here/../bin/part_bench" ]]; then dir="$here/.."
elif [[ -x "$here/bin/part_bench" ]]; then dir=$here
else dir=build; fi
out=${2:-${OUT:+$OUT/}part_floor.txt}
bin="$dir/bin/part_bench"
[[ -x "$bin" ]] || { echo "no $bin: make a bundle (scripts/make_gpu_bundle.sh) or build part_bench" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 WEFT_TIMEOUT=${WEFT_TIMEOUT:-10}
grids=${PART_FLOOR_GRIDS:-1,8,64,256}
ar_grids=${PART_FLOOR_AR_GRIDS:-2,8,32,64}
budget_s=${PART_FLOOR_BUDGET:-150}
t_start=$(date +%s)
end=$(( t_start + budget_s ))
tmp=$(mktemp -d)

export CUDA_MPS_PIPE_DIRECTORY=/tmp/weft-mps CUDA_MPS_LOG_DIRECTORY=/tmp/weft-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_start() { nvidia-cuda-mps-control -d && echo "# mps started" || echo "# mps did not start: the ranks time-slice the GPU"; }
mps_stop() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 2; pgrep -a nvidia-cuda-mps >/dev/null && echo "# mps still running" || echo "# mps stopped"; }
cleanup() { mps_stop; rm -rf "$tmp"; }
trap cleanup EXIT

# shellcheck source=bench/lib_steps.sh
. "$(dirname "$0")/lib_steps.sh"
step() {  # step NAME FILE LIMIT COMMAND...: at most LIMIT s and not past the budget
  local name=$1 file=$2 limit=$3
  shift 3
  bounded_step "$name" "$file" "$limit" "$end" "$@"
  if (( STEP_RC == 124 || STEP_RC == 137 )); then  # a killed client may leave MPS refusing the next ones
    echo "## restarting MPS after the kill"
    mps_stop
    mps_start
  fi
}

{
  echo "# weft partitioned floor under MPS, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  echo "# bundle: $(sed -n 's/^commit: //p' "$dir/BUNDLE_INFO" 2>/dev/null || echo "$dir")"
  mps_start
  step "goodput" "$tmp/goodput.txt" 30 "$bin" goodput --grids "$grids"
  step "trace, kernel copy (threshold = blocks)" "$tmp/trace_kernel.txt" 35 \
    "$bin" trace --paths kernel --claims weft --thresholds 0 --grids "$grids" --per-block 0
  step "trace, progression engine (threshold ceil(blocks / 32))" "$tmp/trace_proxy.txt" 35 \
    "$bin" trace --paths proxy --claims weft --thresholds -32 --grids "$grids" --per-block 0
  step "allreduce" "$tmp/allreduce.txt" 35 "$bin" allreduce --grids "$ar_grids"
  echo
  echo "# Summary ($(( $(date +%s) - t_start )) s in all)"
  echo
  echo "Goodput (rank 0 -> rank 1, us per iteration; trad: kernel, synchronize, weftSend; part: kernel copy, threshold = blocks; prox: engine, threshold ceil(blocks / 32))"
  grep -h "^ *blocks \|^ *[0-9]\+ \+[0-9]\+ \+[0-9.]\+ " "$tmp/goodput.txt" | sed 's/^/    /'
  echo
  echo "Floor: mean us from the sender's start of an epoch to each step (both ranks; epochs 2-20 of each case)"
  grep -h "^# floor lines" "$tmp/trace_kernel.txt" | head -n 1 | sed 's/^/    /'
  grep -h "^floor" "$tmp/trace_kernel.txt" | head -n 1 | sed 's/^/    /'
  grep -h "^floor  *[0-9]" "$tmp/trace_kernel.txt" "$tmp/trace_proxy.txt" | sed 's/^/    /'
  grep -h "^# clock" "$tmp/trace_kernel.txt" "$tmp/trace_proxy.txt" | sort | uniq -c | sort -rn | head -n 3 | sed 's/^/    /'
  echo
  echo "AllReduce (float64 sum, vector add + partitioned AllReduce inside the kernel; us per iteration)"
  grep -h "skipped\|^ *blocks \|^ *[0-9]\+ \+[0-9]\+ \+\|wrong\|failed" "$tmp/allreduce.txt" | sed 's/^/    /'
  echo
  grep -h "wrong\|failed\|exited with\|still running" "$tmp"/*.txt | sed 's/^/    problem: /'
  true
} 2>&1 | tee "$out"
