#!/usr/bin/env bash
# Installs what weft's build and tests need, from Debian/Ubuntu packages.
# The CUDA toolkit (nvcc, NVRTC, NCCL) is expected under /usr/local/cuda; without it the
# CPU part (compiler, simulator, CLI) still builds and tests. pybind11-dev, python3-dev and
# python3-pytest build and test the Python module (docs/python.md); without them it is skipped.
# libucx-dev gives UCX's headers to the network transport (src/net; libucp.so.0 is loaded at
# run time); without them the transport is compiled out and says so when asked for.
set -euo pipefail
pkgs=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev clang libclang-rt-14-dev
      pybind11-dev python3-dev python3-pytest libucx-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
