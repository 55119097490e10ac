#!/usr/bin/env bash
# Configures and builds weft into build/ (binaries in build/bin). Extra arguments go to cmake's
# configure step, e.g. -DWEFT_GPU_ARCHS="90;100".
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${WEFT_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja "$@" >/dev/null
cmake --build build -j "$jobs"
