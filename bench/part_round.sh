#!/usr/bin/env bash
# The partitioned-communication round (paper 002 §VI) in one go, on a machine with GPUs:
#   bench/part_round.sh [DIR] [OUTPUT]
# DIR holds bin/part_bench (a build dir configured with -DWEFT_BUILD_BENCH=ON, or a folder
# made by scripts/make_part_bundle.sh; default build); OUTPUT (default part_round.txt) gets
# everything, and the summary tables (the issue's) come last. Two ranks, one per GPU (with one
# GPU both share it and every table says so: correctness, not speed).
#
# Steps, each bounded by `timeout`, the whole round by PART_ROUND_BUDGET seconds (default
# 190; a step gets what is left of it, and one with less than 5 s left does not run):
#   1. part_bench overheads (Table I), pready (Figure 3), trace (where an epoch's time goes:
#      WEFT_PART_TRACE host lines and per-block device times), goodput within the host
#      (Figure 4), goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2, Figure 5's case;
#      UCX), allreduce against NCCL (Figures 6-7, 1K to 32K blocks): each at most
#      PART_STEP_TIMEOUT seconds (default 120), all of them ending PART_TESTS_BUDGET seconds
#      before the round's end
#   2. when DIR/bin/weft_part_gpu_tests exists and PART_ROUND_TESTS is not 0, within
#      PART_TESTS_BUDGET seconds (default 60), each test at most PART_TEST_TIMEOUT (default
#      30) with WEFT_TIMEOUT=20: p2p, coll, reuse (PART_REUSE_EPOCHS epochs per case,
#      default 200), arrived (200 epochs, one GPU) and misuse on the kernel-copy path, reuse
#      and misuse on the progression-engine path
#   3. the summary: goodput table (blocks, traditional, kernel-copy and engine µs, ratios),
#      pbuf_prepare mean ± sd, allreduce against NCCL
# PART_ROUND_QUICK=1: the short round, every target of issue 28 in one call (budget default
#   225 s, tests 45 s, each benchmark step at most PART_STEP_TIMEOUT, default 45 s): goodput
#   within the host at PART_GOODPUT_GRIDS (default 1,8,64,256,4096,32768), goodput across 2
#   emulated nodes at PART_NODES_GRIDS (default 1,8,64,256), overheads (pbuf_prepare), trace
#   at PART_TRACE_GRIDS (default 256), thresholds 1 and all, PART_TRACE_ROWS (default 16)
#   blocks by pready start, allreduce against NCCL (1K to 32K blocks; with one GPU only the
#   grids both ranks' blocks fit at once, and no NCCL column); the tests p2p, reuse and
#   arrived on the kernel-copy path and reuse on the engine path; then every summary.
# One GPU under CUDA MPS, the floor of an epoch step by step: bench/part_floor_mps.sh.
set -uo pipefail
dir=${1:-build}
out=${2:-part_round.txt}
bin="$dir/bin/part_bench"
tests="$dir/bin/weft_part_gpu_tests"
[[ -x "$bin" ]] || { echo "no $bin: build part_bench (-DWEFT_BUILD_BENCH=ON) or make a bundle" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
quick=${PART_ROUND_QUICK:-0}
step_s=${PART_STEP_TIMEOUT:-120}
if [[ "$quick" == 1 ]]; then
  budget_s=${PART_ROUND_BUDGET:-225}
  tests_budget_s=${PART_TESTS_BUDGET:-45}
else
  budget_s=${PART_ROUND_BUDGET:-190}
  tests_budget_s=${PART_TESTS_BUDGET:-60}
fi
goodput_grids=${PART_GOODPUT_GRIDS:-1,8,64,256,4096,32768}
test_s=${PART_TEST_TIMEOUT:-30}
reuse_epochs=${PART_REUSE_EPOCHS:-200}
t_start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# step NAME FILE LIMIT END COMMAND...: bench/lib_steps.sh's bounded step.
# shellcheck source=bench/lib_steps.sh
. "$(dirname "$0")/lib_steps.sh"
step() { bounded_step "$@"; }

{
  echo "# weft partitioned round, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  run_tests=0
  [[ -x "$tests" && "${PART_ROUND_TESTS:-1}" != 0 ]] && run_tests=1
  round_end=$(( t_start + budget_s ))
  bench_end=$(( round_end - run_tests * tests_budget_s ))
  : > "$tmp/overheads.txt"; : > "$tmp/goodput_nodes.txt"; : > "$tmp/allreduce.txt"
  if [[ "$quick" == 1 ]]; then
    # Every target of issue 28 in one short call: goodput within the host and across 2
    # emulated nodes, pbuf_prepare, the AllReduce against NCCL, a short trace.
    q_s=${PART_STEP_TIMEOUT:-45}
    step "goodput within the host" "$tmp/goodput.txt" "$q_s" "$bench_end" "$bin" goodput --grids "$goodput_grids"
    step "goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2: prox over UCX; part stays within the host)" \
      "$tmp/goodput_nodes.txt" "$q_s" "$bench_end" env WEFT_EMULATE_NODES=2 "$bin" goodput --grids "${PART_NODES_GRIDS:-1,8,64,256}"
    step "overheads" "$tmp/overheads.txt" 30 "$bench_end" "$bin" overheads
    step "trace (per-block steps; claim weft against each-block; blocks of the 256-block grid by start)" "$tmp/trace.txt" 30 "$bench_end" \
      "$bin" trace --grids "${PART_TRACE_GRIDS:-256}" --per-block 256 --rows "${PART_TRACE_ROWS:-16}" --thresholds 1,0
    # Last of the benchmarks: with the ranks on one GPU it runs only the grids both ranks' blocks
    # fit at once (the bench says which it skips).
    step "allreduce" "$tmp/allreduce.txt" "$q_s" "$bench_end" "$bin" allreduce --grids 1024,2048,4096,8192,16384,32768
    test_list=("p2p --ranks 2" "reuse --ranks 2 --epochs $reuse_epochs" "reuse --ranks 2 --path proxy --epochs $reuse_epochs" "arrived --epochs 200")
  else
    step "overheads" "$tmp/overheads.txt" "$step_s" "$bench_end" "$bin" overheads
    step "pready" "$tmp/pready.txt" "$step_s" "$bench_end" "$bin" pready
    step "trace" "$tmp/trace.txt" "$step_s" "$bench_end" "$bin" trace --grids 1,8,256,4096,32768 --rows 16
    step "goodput within the host" "$tmp/goodput.txt" "$step_s" "$bench_end" "$bin" goodput
    step "goodput across 2 emulated nodes (WEFT_EMULATE_NODES=2: prox over UCX; part stays within the host)" \
      "$tmp/goodput_nodes.txt" "$step_s" "$bench_end" env WEFT_EMULATE_NODES=2 "$bin" goodput --grids "$goodput_grids"
    step "allreduce" "$tmp/allreduce.txt" "$step_s" "$bench_end" "$bin" allreduce --grids 1024,2048,4096,8192,16384,32768
    test_list=("p2p --ranks 2" "coll --ranks 2" "reuse --ranks 2 --epochs $reuse_epochs" "arrived --epochs 200" "misuse"
               "reuse --ranks 2 --path proxy --epochs $reuse_epochs" "misuse --path proxy")
  fi
  if (( run_tests )); then
    # The tests after the benchmarks: a test that hangs costs its own limit, not the tables.
    tests_end=$(( $(date +%s) + tests_budget_s ))
    (( tests_end > round_end )) && tests_end=$round_end
    for t in "${test_list[@]}"; do
      step "test $t" "$tmp/test.txt" "$test_s" "$tests_end" env WEFT_TIMEOUT=20 "$tests" $t
    done
  fi
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
  echo "Trace (kernel copy; claim_us and slope_ns per case: a staircase of claims served one by one shows as a slope near the claim's cost per block)"
  echo
  grep -h "^# trace\|^ *blocks \|^ *[0-9]\+ \+[0-9]\+ \+\(weft\|each-block\) \|^floor\|wrong" "$tmp/trace.txt" | sed 's/^/    /'
  echo
  summary "$tmp/goodput_nodes.txt" "Goodput across 2 emulated nodes (engine over UCX)"
  echo "pbuf_prepare after the first call (sender, 100 calls): $(sed -n 's/^pbuf_prepare, average *//p' "$tmp/overheads.txt")"
  echo
  echo "AllReduce (float64 sum, 2 ranks): vector add + partitioned AllReduce against vector add + NCCL + synchronize"
  echo
  echo "| blocks | bytes | NCCL + sync us | partitioned us | NCCL / partitioned |"
  echo "| ---: | ---: | ---: | ---: | ---: |"
  awk '$1 ~ /^[0-9]+$/ && NF == 5 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$tmp/allreduce.txt"
  grep -h "skipped\|wrong\|failed" "$tmp/allreduce.txt" | sed 's/^/    /'
  true
} 2>&1 | tee "$out"
