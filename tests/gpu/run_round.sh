#!/usr/bin/env bash
# One round on a GPU machine (the device tool): machine facts, the GPU tests, then
# `weft bench` against NCCL. Logs go to $OUT (or ./gpu-round-out); a summary is printed last.
# Usage: tests/gpu/run_round.sh BUILD_DIR [quick|full|bench|tests]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:?build dir}
MODE=${2:-quick}
OUT=${OUT:-$PWD/gpu-round-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"; : > "$OUT/all.log"
note() { echo "$*" | tee -a "$SUMMARY"; }
run() {  # run NAME TIMEOUT CMD...: output into all.log (bench logs kept apart too)
  local name=$1 t=$2; shift 2
  local t0=$(date +%s.%N)
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  note "$(printf '%-28s rc=%-3s %6.1fs  %s' "$name" "$rc" "$dt" "$(grep -v '^ *$' "$OUT/$name.log" | tail -n 1 | cut -c1-160)")"
  { echo "==== $name (rc=$rc)"; cat "$OUT/$name.log"; } >> "$OUT/all.log"
  case $name in bench*) ;; *) rm -f "$OUT/$name.log" ;; esac
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  ldconfig -p | grep -i nccl
  python3 -c 'import torch; print("torch sees", torch.cuda.device_count(), "GPUs")' 2>&1 | tail -1
} > "$OUT/machine.log" 2>&1
note "machine: $(head -n 1 "$OUT/machine.log")  $(grep -c H200 "$OUT/machine.log") lines naming H200; nccl: $(grep -m1 libnccl.so.2 "$OUT/machine.log" | awk '{print $NF}')"

T=$B/bin/weft_gpu_tests
if [ "$MODE" != bench ] && [ "$MODE" != compiled ]; then
  export WEFT_TIMEOUT=20
  run never_joins 60 "$T" never_joins
  run peer_stops 90 "$T" peer_stops
  run collectives_2_small 300 "$T" collectives --ranks 2 --counts 0,1,7,1024,1048579
  run p2p_2 120 "$T" p2p --ranks 2
  [ -x "$B/bin/weft_channel_tests" ] && run memory_channel_3 120 "$B/bin/weft_channel_tests" --ranks 3
  run graph_2 120 "$T" graph --ranks 2
  run initall 120 "$T" initall
  run collectives_1 300 "$T" collectives --ranks 1 --counts 0,1,7,1024,1048579
  if [ "$MODE" = full ] || [ "$MODE" = tests ]; then
    run collectives_2_64Mi 900 "$T" collectives --ranks 2 --counts 67108864
    run collectives_2_ring_ll 300 env WEFT_ALGO=ring WEFT_PROTO=LL "$T" collectives --ranks 2 --counts 1,7,1024,1048579
    run collectives_2_pairs_simple 300 env WEFT_ALGO=allpairs WEFT_PROTO=Simple "$T" collectives --ranks 2 --counts 1,7,1024,1048579
    # compute-sanitizer's four tools over every kernel at 1, 2 and 4 ranks (docs/testing.md).
    run sanitizers 900 env WEFT_TIMEOUT=300 OUT="$OUT/sanitizers" "$(dirname "$0")/run_sanitizers.sh" "$B"
  fi
  unset WEFT_TIMEOUT
fi
if [ "$MODE" = compiled ]; then
  # Plans compiled from algorithms/ instead of the built-in ones.
  export WEFT_TIMEOUT=20
  ALGOS=ring_allreduce,ring_allgather,ring_reducescatter,chain_broadcast
  run compiled_collectives_2 300 env WEFT_ALGO=$ALGOS "$T" collectives --ranks 2 --counts 0,1,7,1024,1048579 --only AllReduce
  run compiled_collectives_2_ag 300 env WEFT_ALGO=$ALGOS "$T" collectives --ranks 2 --counts 0,1,7,1024,1048579 --only AllGather
  run compiled_collectives_2_rs 300 env WEFT_ALGO=$ALGOS "$T" collectives --ranks 2 --counts 0,1,7,1024,1048579 --only ReduceScatter
  run compiled_collectives_2_bc 300 env WEFT_ALGO=$ALGOS "$T" collectives --ranks 2 --counts 0,1,7,1024,1048579 --only Broadcast
  unset WEFT_TIMEOUT
  for inst in 8 24; do
    run "sweep_compiled_i$inst" 120 env WEFT_ALGO=$ALGOS WEFT_INSTANCES=$inst "$B/bin/weft" bench AllReduce AllGather ReduceScatter --sizes 64K:1G --factor 16 --no-nccl
  done
  MODE=done
fi
if [ "$MODE" != tests ] && [ "$MODE" != done ]; then
  run bench 240 "$B/bin/weft" bench AllReduce AllGather ReduceScatter --sizes 8:1G --csv "$OUT/bench.csv"
  run bench_graph 90 "$B/bin/weft" bench AllReduce --sizes 8:1M --graph --csv "$OUT/bench_graph.csv"
fi
if [ "$MODE" = perf ]; then
  # Sweeps of the large-message knobs (weft only, no check): slot size x instances x depth.
  for slot in 524288 1048576 2097152; do
    for inst in 16 24; do
      for depth in 2 4; do
        run "sweep_s${slot}_i${inst}_d${depth}" 60 env WEFT_SLOT_BYTES=$slot WEFT_INSTANCES=$inst WEFT_FIFO_DEPTH=$depth "$B/bin/weft" bench AllReduce AllGather ReduceScatter --sizes 16M:1G --factor 4 --no-nccl --no-check --iters 10
      done
    done
  done
fi
note "---- failures:"
grep -h "FAIL\|timed out\|failed" "$OUT/all.log" | head -n 20 | tee -a "$SUMMARY"
note "---- sweeps (name size weft_us busbw):"
awk '/^==== sweep/{name=$2} /^# [A-Za-z]/{coll=$2} name!="" && /^ +[0-9]/{printf "%-24s %-14s %11s %9s %8s %4s\n", name, coll, $1, $5, $7, $9}' "$OUT/all.log" | tee -a "$SUMMARY"
note "---- bench:"
grep -h -v "^$" "$OUT/bench.log" "$OUT/bench_graph.log" 2>/dev/null | cut -c1-140 | tail -n 100
