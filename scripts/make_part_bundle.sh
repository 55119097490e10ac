#!/usr/bin/env bash
# Makes the folder the partitioned round (bench/part_round.sh) carries to the device machine:
# bin/part_bench, bin/weft_part_gpu_tests (both link weft statically: nothing else to carry),
# debug info stripped (about 10 MB each), part_round.sh and part_floor_mps.sh (one GPU under
# CUDA MPS: `bash OUTDIR/part_floor_mps.sh OUTDIR`).
#
#   scripts/make_part_bundle.sh OUTDIR [BUILD_DIR]
#   run kind=nvidia-h200-x2 carry=["OUTDIR"] command="bash OUTDIR/part_round.sh OUTDIR OUTDIR/part_round.txt"
#
# BUILD_DIR (default build-release/ of this checkout, configured Release with the benchmarks
# and sm_90 if it does not exist) must be configured with -DWEFT_BUILD_BENCH=ON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${1:?usage: scripts/make_part_bundle.sh OUTDIR [BUILD_DIR]}
BUILD=${2:-$ROOT/build-release}
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_GPU_ARCHS=90 -DWEFT_BUILD_BENCH=ON >/dev/null
fi
grep -q '^WEFT_BUILD_BENCH:BOOL=ON' "$BUILD/CMakeCache.txt" ||
  { echo "make_part_bundle.sh: $BUILD is not configured with -DWEFT_BUILD_BENCH=ON" >&2; exit 1; }
cmake --build "$BUILD" -j "${WEFT_BUILD_JOBS:-2}" --target part_bench weft_part_gpu_tests
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/bin"
for b in part_bench weft_part_gpu_tests; do strip --strip-debug -o "$OUTDIR/bin/$b" "$BUILD/bin/$b"; done
cp "$ROOT/bench/part_round.sh" "$ROOT/bench/part_floor_mps.sh" "$ROOT/bench/lib_steps.sh" "$OUTDIR/"
echo "made $OUTDIR: $(du -sh "$OUTDIR" | cut -f1)"
