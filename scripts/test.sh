#!/usr/bin/env bash
# Runs weft's whole test suite: builds, runs every CTest test (GPU tests skip themselves on a
# machine without GPUs), then builds the libFuzzer targets with clang and fuzzes each for
# WEFT_FUZZ_SECONDS (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${WEFT_BUILD_JOBS:-$(nproc)}
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$jobs"
if command -v clang++ >/dev/null; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DWEFT_BUILD_FUZZ=ON -DWEFT_ENABLE_CUDA=OFF \
    -DWEFT_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j "$jobs" --target weft_fuzz_targets
  ctest --test-dir build-fuzz --output-on-failure -L fuzz
else
  echo "test.sh: clang++ not found, fuzzing skipped" >&2
  exit 1
fi
