#!/usr/bin/env bash
# Issue 32 item 2: the Simple bulk path's switches against NCCL in one device call
# (docs/runtime.md, "Large messages against NCCL"). For each variant (environment settings),
# `weft bench` runs AllReduce, AllGather, ReduceScatter, Broadcast and Reduce from 16 MiB to
# 1 GiB (factor 4) on every GPU of the machine, weft and NCCL on the same buffers in the same
# run, #wrong checked; then a table of weft busbw / NCCL busbw per variant, collective and
# size, with weft's thread blocks per rank in brackets (NCCL's beside the collective). If time
# is left, one traced call of 256 MiB per AllReduce, Broadcast and Reduce (trace.log).
#
#   bench/bulk_round.sh BUNDLE [VARIANT...]
#
# BUNDLE is a folder made by scripts/make_gpu_bundle.sh (bin/weft, lib/libweft.so.0,
# share/weft/). VARIANTs are names from the list below (default: all, in that order). Logs
# and CSV files go to $OUT (default ./bulk-round-out). No variant starts once ROUND_BUDGET_S
# (default 150) seconds are spent, and each run's limit is cut to what is left.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:?usage: bench/bulk_round.sh BUNDLE [VARIANT...]}
shift
B=$(cd "$B" && pwd -P)
W="$B/bin/weft"
[ -x "$W" ] || { echo "bulk_round.sh: $W is missing (make the bundle with scripts/make_gpu_bundle.sh)" >&2; exit 2; }
[ -d "$B/share/weft/algorithms" ] && export WEFT_DATA_DIR="$B/share/weft"
OUT=${OUT:-$PWD/bulk-round-out}
BUDGET=${ROUND_BUDGET_S:-150}
mkdir -p "$OUT"
export WEFT_CACHE_DIR="$OUT/gen-cache" WEFT_TIMEOUT=${WEFT_TIMEOUT:-30}

# name|settings: the defaults first (WEFT_FUSE_COPY on), then each switch alone, then together.
VARIANTS="default|
window2|WEFT_MB_WINDOW=2
postwarp|WEFT_POST_WARP=1
nofuse|WEFT_FUSE_COPY=0
wide|WEFT_MOVER_WIDE=1
slot1m|WEFT_SLOT_BYTES=1048576
all|WEFT_MB_WINDOW=2 WEFT_POST_WARP=1
all_slot1m|WEFT_MB_WINDOW=2 WEFT_POST_WARP=1 WEFT_SLOT_BYTES=1048576
all_wide|WEFT_MB_WINDOW=2 WEFT_MOVER_WIDE=1
gen|WEFT_EXECUTOR=gen
roles2|WEFT_BLOCK_ROLES=2"
WANT=${*:-$(echo "$VARIANTS" | cut -d'|' -f1 | tr '\n' ' ')}

T0=$(date +%s)
N=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "machine: $N GPU(s), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
[ "$N" -ge 2 ] || echo "WARNING: fewer than 2 GPUs: no row below is a speed"
for v in $WANT; do
  line=$(echo "$VARIANTS" | grep "^$v|") || { echo "bulk_round.sh: unknown variant '$v'" >&2; exit 2; }
  settings=${line#*|}
  left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 12 ]; then echo "$(printf '%-11s' "$v") skipped: the round's budget is spent"; continue; fi
  t=$((left < 40 ? left : 40))
  # shellcheck disable=SC2086  # the settings are words
  timeout -k 5 "$t" env $settings "$W" bench AllReduce AllGather ReduceScatter Broadcast Reduce --sizes 16M:1G \
    --factor 4 --iters 10 --warmup 3 --csv "$OUT/$v.csv" > "$OUT/$v.log" 2>&1
  echo "$(printf '%-11s rc=%-3s %4ss' "$v" "$?" "$(($(date +%s) - T0))") $settings"
done

# Where the time goes per thread block (docs/traces.md): one traced call of 256 MiB per
# collective under the defaults, if the budget allows (its report is in trace.log).
if [ $((BUDGET - ($(date +%s) - T0))) -ge 25 ]; then
  timeout -k 5 20 "$W" bench AllReduce Broadcast Reduce --sizes 256M:256M --no-nccl --iters 3 --warmup 1 \
    --trace "$OUT/trace.json" > "$OUT/trace.log" 2>&1
  echo "trace       rc=$?   (trace.log, trace.*.json)"
fi

# shellcheck disable=SC2086  # one argument per variant
python3 - "$OUT" $WANT <<'EOF'
import csv, os, sys
out, names = sys.argv[1], sys.argv[2:]
def size(b):
    b = int(b)
    return f"{b >> 30}G" if b >= 1 << 30 else f"{b >> 20}M"
rows = {}
for v in names:
    p = os.path.join(out, v + ".csv")
    if not os.path.exists(p):
        continue
    for r in csv.DictReader(open(p)):
        if "nccl_busbw" not in r:  # no GPU: weft bench ran the simulator
            print(f"{v}: {p} holds the simulator's rows (no GPU), not a measurement")
            break
        rows.setdefault((r["collective"], v), []).append(r)
colls = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"]
print("\nweft busbw / NCCL busbw (weft thread blocks per rank); NCCL's blocks after the collective; ! = #wrong")
for c in colls:
    for v in names:
        rs = rows.get((c, v))
        if not rs:
            continue
        cells = []
        for r in rs:
            nb, wb = float(r["nccl_busbw"] or 0), float(r["weft_busbw"] or 0)
            bad = "!" if r["weft_wrong"] not in ("0", "") else ""
            cells.append(f"{size(r['bytes'])} {wb / nb if nb > 0 else 0:.2f}({r['weft_tbs']}){bad}")
        print(f"{c:<13} [{rs[-1]['nccl_tbs']:>2}] {v:<11} " + "  ".join(cells))
EOF
