#!/usr/bin/env bash
# Makes the folder a GPU round carries to the device machine: what tests/gpu/run_round_n.sh
# (issue 32: nccl-tests on N GPUs) and tests/gpu/run_round4.sh need, from a Release build for
# sm_90, debug info stripped, small enough that two bundles (a baseline and the new one)
# travel in one call (the device tool carries 64 MiB with the checkout).
#
# The lead's commands are in docs/gpu-rounds.md; in short, from the checkout `run` sends:
#   scripts/make_gpu_bundle.sh gpu-bundle
#   git worktree add --detach /tmp/weft-base BASE_COMMIT
#   scripts/make_gpu_bundle.sh gpu-bundle-base /tmp/weft-base/build-release --source /tmp/weft-base --weft-only
#   run kind=nvidia-h200-x4 timeout_s=600 carry=["gpu-bundle","gpu-bundle-base"]
#       command="bash gpu-bundle/run_round_n.sh gpu-bundle gpu-bundle-base"
#
# Usage: scripts/make_gpu_bundle.sh OUTDIR [BUILD_DIR] [--no-build] [--source CHECKOUT] [--weft-only]
#   BUILD_DIR   a build tree configured Release with WEFT_GPU_ARCHS holding 90 (default:
#               build-release/ in the source checkout, configured there if it does not exist)
#   --no-build  copy from BUILD_DIR as it is
#   --source    the checkout whose sources BUILD_DIR builds and whose algorithms/ and
#               topologies/ the bundle takes (default: this one); the round's scripts always
#               come from this checkout. A worktree at an older commit makes a base bundle.
#   --weft-only bin/weft and lib/libweft.so.0 alone (all a base bundle needs: the round runs
#               only its `weft bench`)
# Environment: WEFT_BUILD_JOBS (default 2); NT_SRC (nccl-tests' source; default
# nccl-carry/nccl-tests-src of this checkout or of the main checkout above .wt/); NCCL_CARRY
# (a folder of prebuilt nccl-tests for run_round4.sh, copied as nccl-carry/ when it holds
# lib/libweft_nccl.so).
#
# Bundle layout: bin/{weft,weft_gpu_tests,weft_gpu_steady,part_bench,weft_part_gpu_tests,
# weft_window_gpu_tests,weft_ce_gpu_tests,nccl_api_gpu_tests,peer_copy_bench,part_engine_host,cuda_call_cost}, lib/libweft.so.0 (the soname the
# binaries load through their RUNPATH $ORIGIN/../lib), lib/libweft_nccl.so (soname
# libnccl.so.2; lib/weft-nccl/libnccl.so.2 links to it for nccl_api_gpu_tests, whose RUNPATH
# holds $ORIGIN/../lib/weft-nccl), include/weft/nccl.h, share/weft/{algorithms,topologies,selection},
# nccl-tests-src/, torch/ (the PyTorch check), run_round_n.sh, round_nccltests.sh,
# round_n_tables.py, tuned_rows.py, run_round4.sh, round_tables.py, part_round.sh, part_floor_mps.sh, lib_steps.sh, BUNDLE_INFO, and `ctest -L gpu`
# without the build tree: run_ctest.sh, ctest_gpu.list, tests/*.sh (bin/ then also holds
# weft_channel_tests and weft_gpu_port_tests).
# shellcheck disable=SC2015  # "[ a ] && [ b ] || die" is meant
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd -P)
OUTDIR=""; BUILD=""; NOBUILD=0; SRC=$HERE; ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) NOBUILD=1 ;;
    --weft-only) ONLY=1 ;;
    --source) SRC=$(cd "${2:?--source needs a checkout}" && pwd -P); shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) if [ -z "$OUTDIR" ]; then OUTDIR=$1; elif [ -z "$BUILD" ]; then BUILD=$1; else echo "make_gpu_bundle.sh: unexpected argument '$1'" >&2; exit 2; fi ;;
  esac
  shift
done
[ -n "$OUTDIR" ] || { echo "usage: scripts/make_gpu_bundle.sh OUTDIR [BUILD_DIR] [--no-build] [--source CHECKOUT] [--weft-only]" >&2; exit 2; }
BUILD=${BUILD:-$SRC/build-release}
die() { echo "make_gpu_bundle.sh: $*" >&2; exit 1; }
[ -f "$SRC/CMakeLists.txt" ] && [ -d "$SRC/algorithms" ] || die "$SRC is not a weft checkout"
TARGETS="weft weft_gpu_tests weft_gpu_steady weft_nccl part_bench weft_part_gpu_tests"
# GPU tests of windows, CTA policies and copy engines (tests/gpu/README.md), bench/peer_copy_bench.cu
# (bench/bulk_ab.sh) and the example the launch-recipe test runs, where the build has them.
EXTRA="weft_window_gpu_tests weft_ce_gpu_tests nccl_api_gpu_tests weft_channel_tests weft_gpu_port_tests peer_copy_bench example_allreduce part_engine_host cuda_call_cost"
[ "$ONLY" = 1 ] && TARGETS=weft

if [ "$NOBUILD" = 0 ] && [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_GPU_ARCHS=90 -DWEFT_ENABLE_CUDA=ON \
    -DWEFT_BUILD_BENCH="$([ "$ONLY" = 1 ] && echo OFF || echo ON)" >/dev/null
fi
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a build tree (no CMakeCache.txt)"
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
[ "$(cache CMAKE_BUILD_TYPE)" = Release ] || die "$BUILD is configured '$(cache CMAKE_BUILD_TYPE)', not Release: timings would not be weft's"
case ";$(cache WEFT_GPU_ARCHS);" in *";90;"*|*";90a;"*) ;; *) die "$BUILD builds for '$(cache WEFT_GPU_ARCHS)', which lacks sm_90 (H100/H200)";; esac
grep -q '^CMAKE_CUDA_FLAGS:' "$BUILD/CMakeCache.txt" || die "$BUILD was configured without CUDA (nvcc not found then)"
[ "$(cd "$(cache CMAKE_HOME_DIRECTORY)" 2>/dev/null && pwd -P)" = "$SRC" ] ||
  die "$BUILD builds $(cache CMAKE_HOME_DIRECTORY), not $SRC (--source names the checkout a build tree builds)"
if [ "$NOBUILD" = 0 ] && [ "$ONLY" = 0 ] && [ "$(cache WEFT_BUILD_BENCH)" != ON ]; then
  cmake "$BUILD" -DWEFT_BUILD_BENCH=ON >/dev/null   # part_bench is a benchmark
fi
NVCC=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -n 1 || true)
if [ "$ONLY" = 0 ]; then  # the extra tests exist where the tree builds tests (nccl_api_gpu_tests: with GTest)
  known=$(cmake --build "$BUILD" --target help 2>/dev/null || true)
  for t in $EXTRA; do grep -q "^$t[: ]" <<<"$known" && TARGETS="$TARGETS $t"; done
fi
# shellcheck disable=SC2086  # the target list is split on purpose
[ "$NOBUILD" = 1 ] || cmake --build "$BUILD" -j "${WEFT_BUILD_JOBS:-2}" --target $TARGETS
NEED="bin/weft lib/libweft.so.0"
[ "$ONLY" = 1 ] || NEED="$NEED bin/weft_gpu_tests bin/part_bench bin/weft_part_gpu_tests lib/libweft_nccl.so"
for f in $NEED; do [ -e "$BUILD/$f" ] || die "$BUILD/$f is missing (build the targets $TARGETS)"; done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/bin" "$OUTDIR/lib" "$OUTDIR/share/weft"
for f in $NEED; do cp -L "$BUILD/$f" "$OUTDIR/$f"; done   # files, not links: links travel as links
# Steady-state calls allocate nothing (tests/gpu/steady_calls.cpp): bin/weft_gpu_steady, where
# the build has it.
[ "$ONLY" = 1 ] || [ ! -e "$BUILD/bin/weft_gpu_steady" ] || cp "$BUILD/bin/weft_gpu_steady" "$OUTDIR/bin/"
if [ "$ONLY" = 0 ]; then
  for t in $EXTRA; do [ ! -e "$BUILD/bin/$t" ] || { cp "$BUILD/bin/$t" "$OUTDIR/bin/"; NEED="$NEED bin/$t"; }; done
fi
# The symbol tables go too (the dynamic ones stay): the bundle must stay small.
strip --strip-all "$OUTDIR"/bin/* "$OUTDIR"/lib/*
if [ -e "$OUTDIR/bin/nccl_api_gpu_tests" ]; then  # NCCL's soname, through a link inside the bundle
  mkdir -p "$OUTDIR/lib/weft-nccl"
  ln -s ../libweft_nccl.so "$OUTDIR/lib/weft-nccl/libnccl.so.2"
fi
for d in algorithms topologies selection; do [ -d "$SRC/$d" ] && cp -r "$SRC/$d" "$OUTDIR/share/weft/"; done
if [ "$ONLY" = 0 ]; then
  mkdir -p "$OUTDIR/include/weft" "$OUTDIR/torch"
  cp "$SRC/include/weft/nccl.h" "$OUTDIR/include/weft/"
  cp "$HERE/tests/gpu/run_round_n.sh" "$HERE/tests/gpu/round_nccltests.sh" "$HERE/scripts/round_n_tables.py" "$HERE/scripts/tuned_rows.py" \
     "$HERE/tests/gpu/run_round4.sh" "$HERE/scripts/round_tables.py" "$OUTDIR/"
  [ -f "$SRC/bench/part_round.sh" ] && cp "$SRC/bench/part_round.sh" "$OUTDIR/"
  [ -f "$SRC/bench/part_floor_mps.sh" ] && cp "$SRC/bench/part_floor_mps.sh" "$OUTDIR/"
  [ -f "$SRC/bench/lib_steps.sh" ] && cp "$SRC/bench/lib_steps.sh" "$OUTDIR/"
  cp "$HERE"/tests/gpu/nccl/{torch_check.py,torch_compare.py,nccl_which.py} "$OUTDIR/torch/"
  # `ctest -L gpu` without the build tree: run_ctest.sh runs ctest_gpu.list (scripts/bundle_ctest.py).
  mkdir -p "$OUTDIR/tests"
  cp "$HERE"/tests/gpu/{gen_cache.sh,tune_gpu.sh,bench_trace_check.sh,launch_recipes.sh} "$OUTDIR/tests/"
  cp "$HERE/tests/gpu/run_bundle_ctest.sh" "$OUTDIR/run_ctest.sh"
  python3 "$HERE/scripts/bundle_ctest.py" "$BUILD" "$SRC" "$OUTDIR" "$OUTDIR/ctest_gpu.list"
  chmod +x "$OUTDIR"/*.sh "$OUTDIR"/tests/*.sh
  NTS=${NT_SRC:-}
  [ -z "$NTS" ] && for c in "$HERE/nccl-carry/nccl-tests-src" "$HERE/../../nccl-carry/nccl-tests-src"; do [ -f "$c/src/Makefile" ] && NTS=$c && break; done
  if [ -n "$NTS" ] && [ -f "$NTS/src/Makefile" ]; then
    cp -r "$NTS" "$OUTDIR/nccl-tests-src"; rm -rf "$OUTDIR/nccl-tests-src/.git" "$OUTDIR/nccl-tests-src/build"
    echo "nccl-tests-src: copied from $NTS"
  else
    echo "nccl-tests-src: none found (NT_SRC, nccl-carry/nccl-tests-src): run_round_n.sh takes ./nccl-carry/nccl-tests-src of the checkout, or runs no nccl-tests"
  fi
  CARRY=${NCCL_CARRY:-}
  [ -z "$CARRY" ] && for c in "$HERE/nccl-carry" "$HERE/.wt/nccl/nccl-carry"; do [ -f "$c/lib/libweft_nccl.so" ] && CARRY=$c && break; done
  if [ -n "$CARRY" ] && [ -f "$CARRY/lib/libweft_nccl.so" ]; then cp -rL "$CARRY" "$OUTDIR/nccl-carry"; echo "nccl-carry (run_round4.sh): copied from $CARRY"; fi
fi

# Checks that need no GPU: every library resolves from the bundle, the device code is there
# for sm_90, weft's NCCL library answers to NCCL's soname, the CLI finds its data.
missing=$(cd "$OUTDIR" && for f in $NEED; do env -u LD_LIBRARY_PATH ldd "$f" | sed "s|^|$f: |"; done | grep "not found" || true)
[ -z "$missing" ] || die "libraries not found: $missing"
if command -v cuobjdump >/dev/null; then
  for f in lib/libweft.so.0 $([ "$ONLY" = 1 ] || echo lib/libweft_nccl.so); do
    cuobjdump --list-elf "$OUTDIR/$f" 2>/dev/null | grep -q "sm_90" || die "$f holds no sm_90 code"
  done
fi
if [ "$ONLY" = 0 ]; then
  readelf -d "$OUTDIR/lib/libweft_nccl.so" | grep -q 'SONAME.*\[libnccl\.so\.2\]' || die "lib/libweft_nccl.so's soname is not libnccl.so.2"
fi
env -u WEFT_DATA_DIR "$OUTDIR/bin/weft" simulate ring_allreduce --topology h200-1x4 --size 1M >/dev/null ||
  die "the bundled weft cannot simulate ring_allreduce from its own share/weft"

{
  echo "made: $(date -u +%FT%TZ) on $(hostname)"
  echo "commit: $(git -C "$SRC" rev-parse HEAD 2>/dev/null)$(git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "source: $SRC; build: $BUILD, $(cache CMAKE_BUILD_TYPE), archs $(cache WEFT_GPU_ARCHS), ${NVCC:-nvcc?} $("${NVCC:-nvcc}" --version 2>/dev/null | tail -n 1)"
  echo "contents: $([ "$ONLY" = 1 ] && echo "weft only (a base bundle)" || echo "full")"
} >"$OUTDIR/BUNDLE_INFO"
size=$(du -sm "$OUTDIR" | cut -f1)
[ "$size" -lt 60 ] || die "the bundle is $size MiB; the device tool carries 64 MiB with the checkout"
[ "$size" -lt 40 ] || echo "make_gpu_bundle.sh: warning: $size MiB; a base bundle beside it may not fit the 64 MiB a call carries" >&2
echo "bundle: $OUTDIR, $size MiB"
cat "$OUTDIR/BUNDLE_INFO"
