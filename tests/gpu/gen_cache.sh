#!/usr/bin/env bash
# The generated kernels' disk cache across process starts (docs/generated-kernels.md):
# in a fresh WEFT_CACHE_DIR a first run of a small collectives matrix compiles its kernels
# and writes them; a second run (a new process per rank) loads every kernel from the
# cache and compiles none. Both runs must pass their checks. Exits 77 without a GPU.
# Usage: gen_cache.sh WEFT_GPU_TESTS_BINARY CACHE_DIR
set -u
bin=$1
dir=$2
rm -rf "$dir"
export WEFT_EXECUTOR=gen WEFT_CACHE_DIR="$dir" WEFT_LOG_LEVEL=INFO WEFT_LOG_SUBSYS=GEN
args=(collectives --ranks 2 --only AllReduce --type float32 --counts 1048579)
for run in first second; do
  out=$("$bin" "${args[@]}" 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" = 77 ] && exit 77
  if [ "$rc" != 0 ]; then echo "gen_cache: the $run run failed (exit $rc)"; exit 1; fi
  compiled=$(grep -c "compiled in [0-9.]* ms" <<<"$out")
  loaded=$(grep -c "loaded from the disk cache" <<<"$out")
  rejected=$(grep -c "rejected" <<<"$out")
  echo "gen_cache: $run run: $compiled kernels compiled, $loaded loaded from the disk cache, $rejected cache files rejected"
  if [ "$rejected" != 0 ]; then echo "gen_cache: a cache file written by weft was rejected"; exit 1; fi
  if [ "$run" = first ] && [ "$compiled" = 0 ]; then echo "gen_cache: the first run compiled nothing"; exit 1; fi
  if [ "$run" = second ] && { [ "$compiled" != 0 ] || [ "$loaded" = 0 ]; }; then
    echo "gen_cache: the second run did not take every kernel from the disk cache"
    exit 1
  fi
done
echo "gen_cache: $(ls "$dir" | grep -c '\.cubin$') cubins in $dir"
