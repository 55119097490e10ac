#!/usr/bin/env bash
# Issues 27 and 32: one thread block's rate on the Simple bulk path, the switches as they were
# against the new ones, in one device call (docs/runtime.md, "One thread block's rate";
# docs/gpu-rounds.md). From the repository root:
#
#   bash bench/bulk_ab.sh BUNDLE
#
# BUNDLE is a folder made by scripts/make_gpu_bundle.sh. Four parts, each within its share of
# AB_BUDGET_S (default 150 s; no step starts past its share):
#   1. bin/peer_copy_bench (if bundled), one way and both ways: what one block moves over
#      NVLink by SM stores, SM loads and bulk copies, 1 to 32 blocks (128 MiB, checked);
#   2. AllReduce 1 GiB at 8, 16 and 24 thread blocks per rank (WEFT_INSTANCES: on 2 ranks the
#      all-pairs plan runs 2 blocks per instance, rings 1), one `weft bench` per variant and
#      block count, weft only: busbw GB/s (CUDA blocks per rank) per variant;
#   3. AllReduce, Broadcast and Reduce, 128 MiB and 1 GiB, weft beside NCCL in the same run,
#      under the defaults and under the new switches: weft busbw / NCCL busbw;
#   4. the GPU tests of the new switches from the bundle's ctest list (postthread: every
#      element against the host reference, 2 and 4 ranks; ranks share GPUs where fewer).
# Environment: AB_RANKS (default: every GPU), AB_BUDGET_S, OUT (logs; default ./bulk-ab-out).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$(cd "${1:?usage: bench/bulk_ab.sh BUNDLE}" && pwd -P)
W="$B/bin/weft"
[ -x "$W" ] || { echo "bulk_ab.sh: $W is missing (scripts/make_gpu_bundle.sh)" >&2; exit 2; }
[ -d "$B/share/weft/algorithms" ] && export WEFT_DATA_DIR="$B/share/weft"
OUT=${OUT:-$PWD/bulk-ab-out}
mkdir -p "$OUT"
export WEFT_CACHE_DIR="$OUT/gen-cache" WEFT_TIMEOUT=${WEFT_TIMEOUT:-30}
BUDGET=${AB_BUDGET_S:-150}
T0=$(date +%s)
N=${AB_RANKS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
left() { echo $((BUDGET - ($(date +%s) - T0))); }
echo "machine: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1); ranks $N; $(head -n 2 "$B/BUNDLE_INFO" | tr '\n' ' ')"
[ "$N" -ge 2 ] || { echo "bulk_ab.sh: needs 2 GPUs or more (AB_RANKS)"; exit 3; }

# 1. One block's ceiling over NVLink.
if [ -x "$B/bin/peer_copy_bench" ]; then
  echo "== 1. peer_copy_bench (GB/s per device, per block in brackets)"
  timeout -k 5 25 "$B/bin/peer_copy_bench" --mib 128 --iters 3 2>&1 | tail -n 12
  timeout -k 5 25 "$B/bin/peer_copy_bench" --mib 128 --iters 3 --duplex 2>&1 | tail -n 12
else
  echo "== 1. skipped: the bundle has no bin/peer_copy_bench"
fi

# 2. AllReduce 1 GiB at 8, 16, 24 blocks. name|settings|the plan's blocks per instance (2 ranks:
# the all-pairs plan's sender and receiver; rings 1; WEFT_BLOCK_ROLES=2 groups two per CUDA block
# only where a plan has more than 24).
NEW="WEFT_MOVER_WIDE=1 WEFT_POST_THREAD=1"
# In order of interest: the budget cuts the last ones first.
if [ "$N" -eq 2 ]; then
  VARIANTS="old||2
new|$NEW|2
new_slot2m|$NEW WEFT_SLOT_BYTES=2097152|2
ring_new|$NEW WEFT_ALGO=AllReduce:ring_allreduce|1
ring_new_slot2m|$NEW WEFT_SLOT_BYTES=2097152 WEFT_ALGO=AllReduce:ring_allreduce|1
new_slot1m_d2|$NEW WEFT_SLOT_BYTES=1048576 WEFT_FIFO_DEPTH=2|2
roles2_new_slot2m|$NEW WEFT_SLOT_BYTES=2097152 WEFT_BLOCK_ROLES=2|1
wide|WEFT_MOVER_WIDE=1|2
postthread|WEFT_POST_THREAD=1|2"
else
  VARIANTS="old||1
new|$NEW|1
new_slot2m|$NEW WEFT_SLOT_BYTES=2097152|1
window2_new|$NEW WEFT_MB_WINDOW=2|1
window2_new_slot1m|$NEW WEFT_MB_WINDOW=2 WEFT_SLOT_BYTES=1048576|1
new_slot1m_d2|$NEW WEFT_SLOT_BYTES=1048576 WEFT_FIFO_DEPTH=2|1
wide|WEFT_MOVER_WIDE=1|1
postthread|WEFT_POST_THREAD=1|1"
fi
echo "== 2. AllReduce 1 GiB, busbw GB/s (CUDA blocks per rank; ! = wrong elements), $N ranks"
P2_END=$((T0 + BUDGET * 55 / 100))
: >"$OUT/p2.jsonl"
while IFS='|' read -r name settings per; do
  for blocks in 8 16 24; do
    [ "$(date +%s)" -lt "$P2_END" ] || { echo "$name x$blocks: not run (budget)" >>"$OUT/p2.skipped"; continue; }
    inst=$((blocks / per))
    # shellcheck disable=SC2086  # the settings are words
    out=$(timeout -k 5 25 env $settings WEFT_INSTANCES=$inst "$W" bench AllReduce --sizes 1G:1G --ranks "$N" \
            --no-nccl --no-sim --json --warmup 2 --iters 5 2>&1)
    row=$(grep '^{"collective"' <<<"$out" | head -n 1)
    [ -n "$row" ] || row="{\"failed\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(tail -n 1 <<<"$out" | cut -c1-120)")}"
    echo "{\"variant\": \"$name\", \"blocks\": $blocks, \"row\": $row}" >>"$OUT/p2.jsonl"
  done
done <<<"$VARIANTS"
python3 - "$OUT/p2.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = list(dict.fromkeys(r["variant"] for r in rows))
print("%-20s %22s %22s %22s" % ("variant", "8 blocks", "16 blocks", "24 blocks"))
for n in names:
    cells = []
    for b in (8, 16, 24):
        r = next((x["row"] for x in rows if x["variant"] == n and x["blocks"] == b), None)
        if r is None: cells.append("not run")
        elif "failed" in r: cells.append("failed: " + r["failed"][:12])
        else: cells.append("%.1f (%s)%s" % (r["weft_busbw"], r.get("weft_tbs", "?"), "!" if r.get("weft_wrong") else ""))
    print("%-20s %22s %22s %22s" % (n, *cells))
EOF
[ -f "$OUT/p2.skipped" ] && cat "$OUT/p2.skipped"
echo "settings:"
while IFS= read -r v; do echo "  $v"; done <<<"$VARIANTS"

# 3. Beside NCCL: defaults, then the new switches.
echo "== 3. weft busbw / NCCL busbw (weft's blocks per rank), 128 MiB and 1 GiB"
P3_END=$((T0 + BUDGET * 78 / 100))
for v in "old|" "new|$NEW" "new_slot2m|$NEW WEFT_SLOT_BYTES=2097152"; do
  name=${v%%|*} settings=${v#*|}
  t=$((P3_END - $(date +%s)))
  [ "$t" -ge 10 ] || { echo "$name: not run (budget)"; continue; }
  # shellcheck disable=SC2086
  timeout -k 5 "$t" env $settings "$W" bench AllReduce Broadcast Reduce --sizes 128M:1G --factor 8 --ranks "$N" \
    --no-sim --warmup 2 --iters 5 --csv "$OUT/p3_$name.csv" >"$OUT/p3_$name.log" 2>&1
  python3 - "$OUT/p3_$name.csv" "$name" <<'EOF'
import csv, os, sys
p, name = sys.argv[1], sys.argv[2]
if not os.path.exists(p): print(f"{name}: no rows (see {p[:-4]}.log)"); sys.exit(0)
for r in csv.DictReader(open(p)):
    if "nccl_busbw" not in r:
        print(f"{name}: {p} holds the simulator's rows (no GPU), not a measurement"); break
    nb, wb = float(r.get("nccl_busbw") or 0), float(r.get("weft_busbw") or 0)
    bad = " WRONG" if r.get("weft_wrong") not in ("0", "", None) else ""
    print(f"{name:<11} {r['collective']:<10} {int(r['bytes']) >> 20:>5} MiB  weft {wb:6.1f} ({r.get('weft_tbs')})  "
          f"NCCL {nb:6.1f} ({r.get('nccl_tbs')})  {wb / nb if nb > 0 else 0:.2f}{bad}")
EOF
done

# 4. The new switches' GPU tests, every element checked.
echo "== 4. GPU tests of the new switches (run_ctest.sh postthread)"
l=$(left)
if [ -x "$B/run_ctest.sh" ] && [ "$l" -ge 20 ]; then
  OUT="$OUT/ctest-out" CTEST_BUDGET_S=$l CTEST_MIN_S=15 CTEST_CAP_S=$l "$B/run_ctest.sh" "$B" 'postthread' 2>&1 | tail -n 6
else
  echo "not run ($([ -x "$B/run_ctest.sh" ] && echo "$l s left" || echo "the bundle has no run_ctest.sh"))"
fi
echo "bulk_ab.sh: $(($(date +%s) - T0)) s"
