#!/usr/bin/env bash
# The partitioned-communication round (paper 002 §VI) in one go, on a machine with GPUs:
#   bench/part_round.sh [DIR] [OUTPUT]
# DIR holds bin/part_bench (a build dir configured with -DWEFT_BUILD_BENCH=ON, or a folder
# made by scripts/make_part_bundle.sh; default build); OUTPUT (default part_round.txt) gets
# everything, and the summary tables (the issue's) come last. Two ranks, one per GPU (with one
# GPU both share it and every table says so: correctness, not speed).
#
# Steps, each bounded by `timeout` (PART_STEP_TIMEOUT seconds, default 120); about 120-200 s
# on two H200s:
#   1. when DIR/bin/weft_part_gpu_tests exists and PART_ROUND_TESTS is not 0: the GPU tests
#      p2p, coll, reuse (1,000 epochs on one request) and misuse on the kernel-copy path,
#      reuse and misuse on the progression-engine path
#   2. part_bench overheads (Table I), pready (Figure 3), trace (where an epoch's time goes:
#      WEFT_PART_TRACE host lines and per-block device times), goodput within the host
#      (Figure 4), goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2, Figure 5's case;
#      UCX), allreduce against NCCL (Figures 6-7, 1K to 32K blocks)
#   3. the summary: goodput table (blocks, traditional, kernel-copy and engine µs, ratios),
#      pbuf_prepare mean ± sd, allreduce against NCCL
set -uo pipefail
dir=${1:-build}
out=${2:-part_round.txt}
bin="$dir/bin/part_bench"
tests="$dir/bin/weft_part_gpu_tests"
[[ -x "$bin" ]] || { echo "no $bin: build part_bench (-DWEFT_BUILD_BENCH=ON) or make a bundle" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
step_s=${PART_STEP_TIMEOUT:-120}
t_start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step() {  # step NAME FILE COMMAND...: runs it bounded, its output into FILE and the log
  local name=$1 file=$2
  shift 2
  local t0=$(date +%s)
  echo "## $name"
  timeout -k 10 "$step_s" "$@" > "$file" 2>&1
  local rc=$?
  cat "$file"
  echo "## $name: rc=$rc, $(( $(date +%s) - t0 )) s"
  return 0
}

{
  echo "# weft partitioned round, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  if [[ -x "$tests" && "${PART_ROUND_TESTS:-1}" != 0 ]]; then
    for t in "p2p --ranks 2" "coll --ranks 2" "reuse --ranks 2" "misuse" "reuse --ranks 2 --path proxy" "misuse --path proxy"; do
      step "test $t" "$tmp/test.txt" "$tests" $t
    done
  fi
  step "overheads" "$tmp/overheads.txt" "$bin" overheads
  step "pready" "$tmp/pready.txt" "$bin" pready
  step "trace" "$tmp/trace.txt" "$bin" trace --grids 1,8,256,4096,32768
  step "goodput within the host" "$tmp/goodput.txt" "$bin" goodput
  step "goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2: prox over UCX; part stays within the host)" \
    "$tmp/goodput_nodes.txt" env WEFT_EMULATE_NODES=2 "$bin" goodput --grids 1,8,64,256,4096,32768
  step "allreduce" "$tmp/allreduce.txt" "$bin" allreduce --grids 1024,2048,4096,8192,16384,32768
  echo
  echo "# Summary ($(( $(date +%s) - t_start )) s in all)"
  echo
  summary() {  # summary FILE TITLE: the goodput table in the issue's columns
    echo "$2"
    echo
    echo "| blocks | traditional us | kernel-copy us | kernel-copy, threshold 1, us | engine us | kernel copy / traditional | threshold 1 / traditional | engine / traditional |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    awk '$1 ~ /^[0-9]+$/ && NF == 10 { printf "| %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx |\n", $1, $3, $4, $5, $6, $8, $9, $10 }' "$1"
    grep -h "wrong elements\|failed" "$1" | sed 's/^/    /'
    echo
  }
  summary "$tmp/goodput.txt" "Goodput within the host (rank 0 -> rank 1, 1,024 threads x 8 B per block; mean of 20 iterations)"
  summary "$tmp/goodput_nodes.txt" "Goodput across 2 emulated nodes (engine over UCX)"
  echo "pbuf_prepare after the first call (sender, 100 calls): $(sed -n 's/^pbuf_prepare, average *//p' "$tmp/overheads.txt")"
  echo
  echo "AllReduce (float64 sum, 2 ranks): vector add + partitioned AllReduce against vector add + NCCL + synchronize"
  echo
  echo "| blocks | bytes | NCCL + sync us | partitioned us | NCCL / partitioned |"
  echo "| ---: | ---: | ---: | ---: | ---: |"
  awk '$1 ~ /^[0-9]+$/ && NF == 5 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$tmp/allreduce.txt"
  grep -h "skipped\|wrong\|failed" "$tmp/allreduce.txt" | sed 's/^/    /'
} 2>&1 | tee "$out"
