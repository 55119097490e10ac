#!/usr/bin/env bash
# Makes the folder a GPU round carries to the device machine: exactly what
# tests/gpu/run_round4.sh needs, from a Release build for sm_90, debug info stripped, under
# 64 MiB (the device tool's limit for everything that travels).
#
# The lead's commands, from the root of the checkout that the device tool sends:
#   scripts/make_gpu_bundle.sh gpu-bundle
#   run  kind=nvidia-h200-x4  timeout_s=600  carry=["gpu-bundle"]
#        command="bash gpu-bundle/run_round4.sh gpu-bundle"
#   python3 scripts/round_tables.py /work/.device/<N> > /tmp/tables.md   (or read tables.md there)
# (docs/results-h200x4.md says the same, and what the round measures.)
#
# Usage: scripts/make_gpu_bundle.sh OUTDIR [BUILD_DIR] [--no-build]
#   BUILD_DIR  a build tree configured Release with WEFT_GPU_ARCHS holding 90 (default:
#              build-release/ in this checkout, configured here if it does not exist)
#   --no-build copy from BUILD_DIR as it is (it must hold bin/weft and bin/weft_gpu_tests;
#              bin/weft_gpu_steady is copied when it is there)
# Environment: WEFT_BUILD_JOBS (default 2), NCCL_CARRY (default nccl-carry/ of this checkout,
# then .wt/nccl/nccl-carry): when it holds lib/libweft_nccl.so it is copied into the bundle
# as nccl-carry/ and the round also runs nccl-tests.
#
# Bundle layout: bin/{weft,weft_gpu_tests,weft_gpu_steady}, lib/libweft.so.0 (the soname both binaries load
# through their RUNPATH $ORIGIN/../lib), share/weft/{algorithms,topologies} (found next to
# the binary), run_round4.sh, round_tables.py, nccl-carry/ (optional), BUNDLE_INFO.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=""; BUILD=""; NOBUILD=0
for a in "$@"; do
  case $a in
    --no-build) NOBUILD=1 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) if [ -z "$OUTDIR" ]; then OUTDIR=$a; elif [ -z "$BUILD" ]; then BUILD=$a; else echo "make_gpu_bundle.sh: unexpected argument '$a'" >&2; exit 2; fi ;;
  esac
done
[ -n "$OUTDIR" ] || { echo "usage: scripts/make_gpu_bundle.sh OUTDIR [BUILD_DIR] [--no-build]" >&2; exit 2; }
BUILD=${BUILD:-$ROOT/build-release}
die() { echo "make_gpu_bundle.sh: $*" >&2; exit 1; }

if [ "$NOBUILD" = 0 ]; then
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_GPU_ARCHS=90 -DWEFT_ENABLE_CUDA=ON \
      -DWEFT_BUILD_BENCH=OFF >/dev/null
  fi
fi
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a build tree (no CMakeCache.txt)"
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
[ "$(cache CMAKE_BUILD_TYPE)" = Release ] || die "$BUILD is configured '$(cache CMAKE_BUILD_TYPE)', not Release: timings would not be weft's"
case ";$(cache WEFT_GPU_ARCHS);" in *";90;"*|*";90a;"*) ;; *) die "$BUILD builds for '$(cache WEFT_GPU_ARCHS)', which lacks sm_90 (H100/H200)";; esac
grep -q '^CMAKE_CUDA_FLAGS:' "$BUILD/CMakeCache.txt" || die "$BUILD was configured without CUDA (nvcc not found then)"
NVCC=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -n 1)
if [ "$NOBUILD" = 0 ]; then
  cmake --build "$BUILD" -j "${WEFT_BUILD_JOBS:-2}" --target weft weft_gpu_tests weft_gpu_steady
fi
for f in bin/weft bin/weft_gpu_tests lib/libweft.so.0; do [ -e "$BUILD/$f" ] || die "$BUILD/$f is missing (build the targets weft and weft_gpu_tests)"; done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/bin" "$OUTDIR/lib" "$OUTDIR/share/weft"
cp "$BUILD/bin/weft" "$BUILD/bin/weft_gpu_tests" "$OUTDIR/bin/"
cp -L "$BUILD/lib/libweft.so.0" "$OUTDIR/lib/libweft.so.0"   # a file, not a link: links travel as links
strip --strip-debug "$OUTDIR/bin/weft" "$OUTDIR/bin/weft_gpu_tests" "$OUTDIR/lib/libweft.so.0"
# Steady-state calls allocate nothing (tests/gpu/steady_calls.cpp): bin/weft_gpu_steady.
if [ -e "$BUILD/bin/weft_gpu_steady" ]; then
  cp "$BUILD/bin/weft_gpu_steady" "$OUTDIR/bin/"
  strip --strip-debug "$OUTDIR/bin/weft_gpu_steady"
fi
cp -r "$ROOT/algorithms" "$ROOT/topologies" "$OUTDIR/share/weft/"
cp "$ROOT/tests/gpu/run_round4.sh" "$ROOT/scripts/round_tables.py" "$OUTDIR/"
chmod +x "$OUTDIR/run_round4.sh"

CARRY=${NCCL_CARRY:-}
if [ -z "$CARRY" ]; then
  for c in "$ROOT/nccl-carry" "$ROOT/.wt/nccl/nccl-carry" "$ROOT/../nccl/nccl-carry"; do [ -f "$c/lib/libweft_nccl.so" ] && CARRY=$c && break; done
fi
if [ -n "$CARRY" ] && [ -f "$CARRY/lib/libweft_nccl.so" ]; then
  cp -rL "$CARRY" "$OUTDIR/nccl-carry"
  echo "nccl-carry: copied from $CARRY"
else
  echo "nccl-carry: none found (NCCL_CARRY, nccl-carry/, .wt/nccl/nccl-carry): the round will not run nccl-tests"
fi

# Checks that need no GPU: the binaries load with the bundle's library alone, the device code
# is there for sm_90, and the CLI finds the algorithms next to itself.
missing=$(env -u LD_LIBRARY_PATH ldd "$OUTDIR/bin/weft" "$OUTDIR/bin/weft_gpu_tests" | grep "not found" || true)
[ -z "$missing" ] || die "libraries not found: $missing"
if command -v cuobjdump >/dev/null; then
  cuobjdump --list-elf "$OUTDIR/lib/libweft.so.0" 2>/dev/null | grep -q "sm_90" || die "libweft.so.0 holds no sm_90 code"
fi
env -u WEFT_DATA_DIR "$OUTDIR/bin/weft" simulate ring_allreduce --topology h200-1x4 --size 1M >/dev/null ||
  die "the bundled weft cannot simulate ring_allreduce from its own share/weft"

{
  echo "made: $(date -u +%FT%TZ) on $(hostname)"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build: $BUILD, $(cache CMAKE_BUILD_TYPE), archs $(cache WEFT_GPU_ARCHS), ${NVCC:-nvcc?} $("${NVCC:-nvcc}" --version 2>/dev/null | tail -n 1)"
  echo "nccl-carry: ${CARRY:-none}"
} >"$OUTDIR/BUNDLE_INFO"
size=$(du -sm "$OUTDIR" | cut -f1)
[ "$size" -lt 60 ] || die "the bundle is $size MiB; the device tool carries 64 MiB with the checkout"
echo "bundle: $OUTDIR, $size MiB"
cat "$OUTDIR/BUNDLE_INFO"
