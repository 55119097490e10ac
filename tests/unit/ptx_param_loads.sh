#!/usr/bin/env bash
# Every device source of src/ compiled to PTX for sm_90 and checked by
# scripts/check_ptx_param_loads.py: no kernel reads or writes a parameter through a generic
# address (the copy-engine rendezvous kernel's fault of the 2026-11-28 round). Usage:
#   ptx_param_loads.sh NVCC SOURCE_DIR     (exit 77 without nvcc or python3)
set -u
NVCC=${1:-}; SRC=${2:-}
[ -n "$NVCC" ] && [ -x "$NVCC" ] || { echo "ptx_param_loads: no nvcc ('$NVCC'): skipped"; exit 77; }
command -v python3 >/dev/null || { echo "ptx_param_loads: no python3: skipped"; exit 77; }
[ -d "$SRC/src" ] || { echo "ptx_param_loads: '$SRC' is not the source tree" >&2; exit 2; }
T=$(mktemp -d /tmp/weft-ptx-XXXXXX); trap 'rm -rf "$T"' EXIT
n=0
while IFS= read -r f; do
  out=$T/$(echo "${f#"$SRC"/}" | tr '/' '_').ptx
  "$NVCC" -O3 -DNDEBUG -arch=sm_90 -std=c++20 -I"$SRC/include" -I"$SRC/src" -ptx "$f" -o "$out" ||
    { echo "ptx_param_loads: nvcc failed on $f" >&2; exit 1; }
  n=$((n + 1))
done < <(find "$SRC/src" -name '*.cu' | sort)
[ "$n" -gt 0 ] || { echo "ptx_param_loads: no .cu file under $SRC/src" >&2; exit 1; }
python3 "$SRC/scripts/check_ptx_param_loads.py" "$T"/*.ptx
