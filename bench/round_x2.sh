#!/usr/bin/env bash
# The two-GPU round of issues 14, 15 and 17 (nvidia-h200-x2 or larger): every speed target
# that one GPU cannot measure, each against the machine's NCCL in the same run. Written
# while only one-GPU machines were lent; docs/gpu-rounds.md says how to run it.
#
#   bench/round_x2.sh BUILD_DIR [STEP...]      steps: 17 14 15 (default all three, in that order)
#
# BUILD_DIR is a CUDA build with -DWEFT_BUILD_BENCH=ON (and -DWEFT_UCX_INCLUDE_DIR=... for the
# network rows). Logs go to $OUT (default ./round-x2-out), one file per command; each command's
# last line is printed as it ends. No step starts once ROUND_BUDGET_S (default 560 s) is spent,
# and each command's limit is cut to what is left, so one device call holds the whole round.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:?usage: bench/round_x2.sh BUILD_DIR [17] [14] [15]}
shift
STEPS=${*:-17 14 15}
OUT=${OUT:-$PWD/round-x2-out}
BUDGET=${ROUND_BUDGET_S:-560}
W="$B/bin/weft"
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
run() {  # run NAME LIMIT CMD...: the limit is cut to what the budget has left
  local name=$1 t=$2 l
  shift 2
  l=$(left)
  [ "$l" -lt 15 ] && { echo "$(printf '%-28s' "$name") skipped: the round's budget is spent"; return; }
  [ "$t" -gt "$l" ] && t=$l
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "$(printf '%-28s rc=%-3s' "$name" "$?") $(grep -v '^ *$' "$OUT/$name.log" | tail -n 1 | cut -c1-150)"
}
N=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.log" 2>&1
echo "machine: $N GPU(s), $(head -n 1 "$OUT/machine.log")"
[ "$N" -ge 2 ] || echo "WARNING: fewer than 2 GPUs: ranks share one GPU and no row below is a speed"

for step in $STEPS; do
  case $step in
  17)
    # Every collective against NCCL, plain and (AllReduce, small) in a CUDA graph.
    run bench17_all 150 "$W" bench AllReduce AllGather ReduceScatter Broadcast Reduce AllToAll --sizes 8:1G --factor 4 --csv "$OUT/bench17_all.csv"
    run bench17_graph 60 "$W" bench AllReduce --sizes 8:64K --graph --csv "$OUT/bench17_graph.csv"
    # Generated kernels against the interpreter from 512 KiB to 4 MiB (compiles first: cache warm-up).
    export WEFT_CACHE_DIR="$OUT/gen-cache"
    run gen_warmup 120 env WEFT_EXECUTOR=gen "$W" bench AllReduce AllGather ReduceScatter --sizes 512K:4M --no-nccl --iters 2
    run gen17 60 env WEFT_EXECUTOR=gen "$W" bench AllReduce AllGather ReduceScatter --sizes 512K:4M --no-nccl --csv "$OUT/gen17.csv"
    run interp17 60 env WEFT_EXECUTOR=interp "$W" bench AllReduce AllGather ReduceScatter --sizes 512K:4M --no-nccl --csv "$OUT/interp17.csv"
    # At most 24 thread blocks per rank from 256 MiB: block roles (the bench prints blocks per rank).
    for r in 2 3; do
      run "roles${r}_17" 60 env WEFT_BLOCK_ROLES=$r "$W" bench AllReduce AllGather ReduceScatter --sizes 256M:1G --factor 4 --csv "$OUT/roles${r}_17.csv"
    done
    # LL128 against LL and Simple where it should win.
    for p in LL LL128 Simple; do
      run "proto_${p}" 60 env WEFT_PROTO=$p "$W" bench AllReduce AllGather ReduceScatter --sizes 16K:16M --factor 4 --no-nccl --csv "$OUT/proto_${p}.csv"
    done
    # Measured idle beside the simulator's, ring and HM AllReduce at 256 MiB.
    run trace_ring 60 env WEFT_ALGO=ring_allreduce "$W" bench AllReduce --sizes 256M:256M --trace "$OUT/ring.json" --no-nccl
    run trace_hm 60 env WEFT_ALGO=hm_allreduce WEFT_GPUS_PER_NODE=$((N / 2 > 0 ? N / 2 : 1)) "$W" bench AllReduce --sizes 256M:256M --trace "$OUT/hm.json" --no-nccl
    ;;
  14)
    # Zero-SM AllGather and the copy-engine AllReduce (registered buffers; weft bench registers).
    run ce14 90 env WEFT_ALGO=ce "$W" bench AllGather AllReduce --sizes 256M:1G --csv "$OUT/ce14.csv"
    run ce14_graph 60 env WEFT_ALGO=ce "$W" bench AllGather AllReduce --sizes 256M:1G --graph --csv "$OUT/ce14_graph.csv"
    # 2 emulated nodes against NCCL forced onto its socket transport, same run.
    run emu14 150 env WEFT_EMULATE_NODES=2 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$W" bench AllReduce AllGather --sizes 1M:1G --factor 4 --csv "$OUT/emu14.csv"
    # A peer killed during a collective: every other rank's error within 10 s.
    run killed14 60 ctest --test-dir "$B" -R 'gpu_peer_dies(_emulated|_hosts_4)?$' --output-on-failure
    ;;
  15)
    run part15 240 bash "$(dirname "$0")/part_round.sh" "$B" "$OUT/part_round.txt"
    ;;
  *) echo "unknown step $step (17, 14 or 15)" ;;
  esac
done
echo "round: $(($(date +%s) - T0)) s; logs and CSV files in $OUT"
