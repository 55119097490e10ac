#!/bin/bash
# The second call of a round after tests/gpu/run_round_packed.sh 1, for the bulk path and the
# partitioned path (docs/results-2026-11-28.md, round 3): correctness of the bulk switches, the
# partitioned reuse test, bench/bulk_round.sh and bench/part_round.sh. From the checkout's root,
# with gpu-pack/bundles.tar.xz (scripts/pack_bundles.sh) carried. Ends within about 560 s.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/../.." || exit 2
[ -x gpu-bundle/bin/weft ] || tar -xJf gpu-pack/bundles.tar.xz || exit 2
OUT=${OUT:-/tmp/weft-round-final}; mkdir -p "$OUT"
N=$(nvidia-smi -L | wc -l)
B=$PWD/gpu-bundle T=$PWD/gpu-bundle/bin/weft_gpu_tests
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=20
gate() {
  local name=$1 t0=$SECONDS rc; shift
  timeout 90 env "$@" >"$OUT/gate.log" 2>&1; rc=$?
  echo "== $name rc=$rc $((SECONDS - t0))s: $(tail -1 "$OUT/gate.log")"
  [ "$rc" = 0 ] || tail -5 "$OUT/gate.log" | sed 's/^/   /'
}
{
  gate "collectives default (fused copies)" "$T" collectives --ranks "$N" --counts 0,1,7,1024,65537,1048579,16777219
  gate "collectives window2+postwarp, 16 KiB slots" WEFT_MB_WINDOW=2 WEFT_POST_WARP=1 WEFT_SLOT_BYTES=16384 "$T" collectives --ranks "$N" --counts 0,7,65537,1048579
  gate "collectives wide movers" WEFT_MB_WINDOW=2 WEFT_MOVER_WIDE=1 "$T" collectives --ranks "$N" --counts 7,65537,1048579
  gate "collectives unfused" WEFT_FUSE_COPY=0 "$T" collectives --ranks "$N" --counts 7,65537,1048579
  gate "graph window2+postwarp" WEFT_MB_WINDOW=2 WEFT_POST_WARP=1 "$T" graph --ranks "$N"
  gate "part reuse (kernel path)" "$B/bin/weft_part_gpu_tests" reuse --ranks 2
  gate "part reuse (engine path)" "$B/bin/weft_part_gpu_tests" reuse --ranks 2 --path proxy
} 2>&1 | tee "$OUT/gates.txt"
OUT=$OUT/bulk ROUND_BUDGET_S=150 timeout 200 bash bench/bulk_round.sh "$B" 2>&1 | tee "$OUT/bulk.txt" | tail -45
PART_ROUND_BUDGET=150 timeout 170 bash bench/part_round.sh "$B" "$OUT/part.txt" > /dev/null 2>&1
tail -45 "$OUT/part.txt"
