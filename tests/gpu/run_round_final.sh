#!/bin/bash
# The second call of a round after tests/gpu/run_round_packed.sh 1 (docs/results-2026-11-28.md,
# round 3): the memory-window and CTA-policy tests as their CTest entries run them (issue 27),
# the bulk path's switches (issue 32), then bench/bulk_round.sh. From the checkout's root, with
# gpu-pack/bundles.tar.xz (scripts/pack_bundles.sh) carried. Ends within about 480 s; the bulk
# round is left out when FINAL_NO_BULK=1.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/../.." || exit 2
[ -x gpu-bundle/bin/weft ] || tar -xJf gpu-pack/bundles.tar.xz || exit 2
OUT=${OUT:-/tmp/weft-round-final}; mkdir -p "$OUT"
N=$(nvidia-smi -L | wc -l)
B=$PWD/gpu-bundle T=$PWD/gpu-bundle/bin/weft_gpu_tests
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=20
FAILS=0
# gate NAME LIMIT VAR=VALUE... CMD...: one line with its exit, seconds and last line.
gate() {
  local name=$1 lim=$2 t0=$SECONDS rc; shift 2
  timeout "$lim" env "$@" >"$OUT/gate.log" 2>&1; rc=$?
  echo "== $name rc=$rc $((SECONDS - t0))s: $(grep -v '^ *$' "$OUT/gate.log" | tail -1 | cut -c1-160)"
  [ "$rc" = 0 ] || { FAILS=$((FAILS + 1)); tail -6 "$OUT/gate.log" | sed 's/^/   /'; }
}
C=0,1,7,1024,16385,65537,131073,1048579
{
  gate "gpu_window_sym_$N" 90 "$T" collectives --ranks "$N" --window sym --counts $C
  gate "gpu_cta_zero_sym_$N" 90 WEFT_CTA_POLICY=zero "$T" collectives --ranks "$N" --window sym --counts $C
  gate "gpu_cta_efficiency_$N" 90 WEFT_CTA_POLICY=efficiency "$T" collectives --ranks "$N" --counts $C
  gate gpu_cta_zero_default_2 60 WEFT_CTA_POLICY=zero "$T" collectives --ranks 2 --window default --counts $C
  gate gpu_cta_zero_registered_2 60 WEFT_CTA_POLICY=zero "$T" collectives --ranks 2 --register --counts $C
  gate gpu_cta_zero_plain_2 40 WEFT_CTA_POLICY=zero "$T" collectives --ranks 2 --counts 1,1048579
  gate gpu_cta_zero_streams_2 40 WEFT_CTA_POLICY=zero WEFT_CE_STREAMS=3 "$T" collectives --ranks 2 --window sym --counts 1,65537,1048579
  gate gpu_window_policy 40 "$B/bin/weft_window_gpu_tests" policy --ranks 3
  gate gpu_window_refuse 40 "$B/bin/weft_window_gpu_tests" refuse --ranks 3
  gate gpu_window_mismatch 40 "$B/bin/weft_window_gpu_tests" mismatch
  gate "gpu_ce_graph_$N" 60 "$B/bin/weft_ce_gpu_tests" graph --ranks "$N"
  gate gpu_nccl_api 90 "$B/bin/nccl_api_gpu_tests"
  gate "bulk: window2+postwarp, 16 KiB slots" 60 WEFT_MB_WINDOW=2 WEFT_POST_WARP=1 WEFT_SLOT_BYTES=16384 "$T" collectives --ranks "$N" --counts 0,7,65537,1048579
  gate "bulk: wide movers" 60 WEFT_MB_WINDOW=2 WEFT_MOVER_WIDE=1 "$T" collectives --ranks "$N" --counts 7,65537,1048579
  gate "bulk: unfused" 60 WEFT_FUSE_COPY=0 "$T" collectives --ranks "$N" --counts 7,65537,1048579
  gate "bulk: graph window2+postwarp" 60 WEFT_MB_WINDOW=2 WEFT_POST_WARP=1 "$T" graph --ranks "$N"
  echo "gates: $FAILS failed"
} 2>&1 | tee "$OUT/gates.txt"
if [ "${FINAL_NO_BULK:-0}" != 1 ]; then
  OUT=$OUT/bulk ROUND_BUDGET_S=${BULK_BUDGET_S:-150} timeout $(( ${BULK_BUDGET_S:-150} + 40 )) bash bench/bulk_round.sh "$B" 2>&1 | tee "$OUT/bulk.txt" | tail -45
fi
