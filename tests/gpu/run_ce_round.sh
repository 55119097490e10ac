#!/usr/bin/env bash
# The copy-engine collectives' round (docs/port-channels.md, "Copy-engine collectives"): their
# GPU tests, then AllGather and AllReduce timed by copy engines (WEFT_ALGO=ce), by weft's
# default SM path and by NCCL in the same run, eager and as graph replays, 1 MiB to 256 MiB.
# Logs go to $OUT (or ./ce-round-out); each command's last line is printed as it ends.
# Usage: tests/gpu/run_ce_round.sh BUILD_DIR [tests|bench|all]   (default all)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:?build dir}
MODE=${2:-all}
OUT=${OUT:-$PWD/ce-round-out}
mkdir -p "$OUT"
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "$(printf '%-26s rc=%-3s' "$name" "$?") $(grep -v '^ *$' "$OUT/$name.log" | tail -n 1 | cut -c1-150)"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.log" 2>&1
if [ "$MODE" != bench ]; then
  run tests 3000 ctest --test-dir "$B" -R '^gpu_ce_' --output-on-failure
  # Thread blocks per captured call (printed per rank), with the INFO lines of the path.
  run graph_blocks 600 env WEFT_LOG_LEVEL=INFO WEFT_LOG_SUBSYS=CE "$B/bin/weft_ce_gpu_tests" graph --ranks 2
fi
if [ "$MODE" != tests ]; then
  for g in "" --graph; do
    tag=${g:+_graph}
    run "bench_ce$tag" 900 env WEFT_ALGO=ce "$B/bin/weft" bench AllGather AllReduce --sizes 1M:256M $g
    run "bench_default$tag" 900 "$B/bin/weft" bench AllGather AllReduce --sizes 1M:256M $g --no-nccl
  done
fi
