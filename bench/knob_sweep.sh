#!/usr/bin/env bash
# One collective under several environment settings on the GPUs (no NCCL, no simulator):
# a Markdown table of busbw and thread blocks per setting and size, to choose knobs by
# measurement (docs/gpu-rounds.md). Settings are read from standard input, one per line
# (space-separated VAR=VALUE; an empty line or "-" is the default); lines starting with # are
# skipped. Each setting is one `weft bench` process; a setting that fails prints its last line.
# Usage: bench/knob_sweep.sh WEFT_BINARY COLLECTIVE SIZES RANKS < settings
#   e.g. printf '%s\n' - WEFT_INSTANCES=8 | bench/knob_sweep.sh gpu-bundle/bin/weft AllReduce 256M:1G 2
# Environment: SWEEP_ITERS (default 10), SWEEP_BUDGET_S (default 120: no setting starts after it).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WEFT=${1:?usage: knob_sweep.sh WEFT COLLECTIVE SIZES RANKS < settings}
COLL=${2:?collective} SIZES=${3:?sizes} RANKS=${4:?ranks}
ITERS=${SWEEP_ITERS:-10} BUDGET=${SWEEP_BUDGET_S:-120}
echo "| setting | size | busbw GB/s | us | thread blocks | plan |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
while IFS= read -r line; do
  case $line in \#*) continue ;; ""|-) line="" ;; esac
  if [ "$SECONDS" -ge "$BUDGET" ]; then echo "| ${line:-default} | | not run (budget) | | | |"; continue; fi
  # shellcheck disable=SC2086  # the setting is split into VAR=VALUE words on purpose
  out=$(env $line "$WEFT" bench "$COLL" --sizes "$SIZES" --factor 4 --ranks "$RANKS" --no-nccl --no-sim --json \
          --warmup 3 --iters "$ITERS" 2>&1)
  rows=$(grep '^{"collective"' <<<"$out")
  if [ -z "$rows" ]; then echo "| ${line:-default} | | failed: $(tail -n 1 <<<"$out" | cut -c1-100) | | | |"; continue; fi
  python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    size = r["bytes"]
    unit = next(u for u, s in (("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)) if size >= 1 << s)
    shift = {"GiB": 30, "MiB": 20, "KiB": 10, "B": 0}[unit]
    wrong = "" if not r.get("weft_wrong") else " (%d wrong)" % r["weft_wrong"]
    print("| %s | %g %s | %.1f%s | %.1f | %s | %s |" % (sys.argv[1], size / (1 << shift), unit, r["weft_busbw"], wrong,
          r["weft_us"], r.get("weft_tbs", "?"), r.get("weft_plan", "?")))
' "${line:-default}" <<<"$rows"
done
