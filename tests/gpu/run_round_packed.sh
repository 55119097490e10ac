#!/bin/bash
# The round of docs/results-2026-11-28.md in two device calls, from gpu-pack/bundles.tar.xz
# (scripts/pack_bundles.sh). Run from the checkout's root:
#   call 1: bash tests/gpu/run_round_packed.sh 1   the issue-32 round (run_round_n.sh, base against
#           new when gpu-bundle-base is packed; nccl-tests also with -R 1, -R 2 and the CTA
#           policies: NT_EXTRA, default "r1 r2 zero eff"), then weft_gpu_steady
#   call 2: bash tests/gpu/run_round_packed.sh 2   bench/latency_round.sh, bench/net_round.sh and
#           the mid-size algorithms forced on N ranks through weft_gpu_tests
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/../.." || exit 2
[ -x gpu-bundle/bin/weft ] || tar -xJf gpu-pack/bundles.tar.xz || exit 2
OUT=${OUT:-/tmp/weft-round-packed}; mkdir -p "$OUT"
case ${1:-1} in
  1)
    base=""; [ -x gpu-bundle-base/bin/weft ] && base=gpu-bundle-base
    NT_EXTRA=${NT_EXTRA-r1 r2 zero eff} ROUND_BUDGET_S=${ROUND_BUDGET_S:-470} bash gpu-bundle/run_round_n.sh gpu-bundle $base
    echo "==== weft_gpu_steady"
    WEFT_TIMEOUT=20 timeout 60 gpu-bundle/bin/weft_gpu_steady 2>&1 | tail -6 ;;
  2)
    N=$(nvidia-smi -L | wc -l)
    OUT=$OUT/lat ROUND_BUDGET_S=115 timeout 130 bash bench/latency_round.sh gpu-bundle 2>&1 | tee "$OUT/latency.txt" | tail -60
    timeout 160 bash bench/net_round.sh gpu-bundle 2>&1 | tee "$OUT/net.txt" | tail -40
    export WEFT_DATA_DIR=$PWD/gpu-bundle/share/weft WEFT_TIMEOUT=20
    for a in twoshot_allreduce:AllReduce twoshot_reducescatter:ReduceScatter direct_broadcast:Broadcast \
             scatter_broadcast:Broadcast direct_reduce:Reduce scatter_reduce:Reduce; do
      echo "== $a on $N ranks: $(WEFT_ALGO=${a%%:*} timeout 40 gpu-bundle/bin/weft_gpu_tests collectives --ranks "$N" \
        --only "${a##*:}" --counts 0,1,7,1024,65537,1048579 2>&1 | tail -1)"
    done 2>&1 | tee "$OUT/algos.txt" ;;
  *) echo "usage: tests/gpu/run_round_packed.sh 1|2" >&2; exit 2 ;;
esac
