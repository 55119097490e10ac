#!/usr/bin/env bash
# Packs GPU bundles into gpu-pack/bundles.tar.xz (ignored by git) so that a new bundle and a base
# bundle travel together under the device tool's 64 MiB (48 + 15 MiB unpacked, about 12 packed).
# Usage: scripts/pack_bundles.sh [BUNDLE...]   (default: gpu-bundle and, when present, gpu-bundle-base)
# On the device: tests/gpu/run_round_packed.sh unpacks and runs the round.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- gpu-bundle $([ -d gpu-bundle-base ] && echo gpu-bundle-base)
for b in "$@"; do [ -x "$b/bin/weft" ] || { echo "pack_bundles.sh: $b is not a bundle (no bin/weft)" >&2; exit 2; }; done
mkdir -p gpu-pack
tar -cf - "$@" | xz -T2 -6 > gpu-pack/bundles.tar.xz
ls -la gpu-pack/bundles.tar.xz
