#!/usr/bin/env bash
# One bundle against another on the same GPUs in one run: `weft bench` of each, interleaved
# (base, new, base, new), plain and in CUDA graphs, and a Markdown table of per-call times with
# base/new (the better of each bundle's two runs; above 1: the new bundle is faster). Issue 25's
# check that a change left small messages no slower (docs/gpu-rounds.md).
# Usage: bench/small_ab.sh BASE_BUNDLE NEW_BUNDLE [COLLECTIVE] [SIZES] [RANKS]
#   (defaults: AllReduce 8:64K 2). Environment: AB_ARGS (default --iters 100 --warmup 20).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BASE=${1:?usage: small_ab.sh BASE_BUNDLE NEW_BUNDLE [COLLECTIVE] [SIZES] [RANKS]} NEW=${2:?new bundle}
COLL=${3:-AllReduce} SIZES=${4:-8:64K} RANKS=${5:-2}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
for mode in plain graph; do
  g=""; [ "$mode" = graph ] && g=--graph
  for rep in 1 2; do
    for which in base new; do
      dir=$BASE; [ "$which" = new ] && dir=$NEW
      # shellcheck disable=SC2086  # AB_ARGS is split on purpose
      WEFT_DATA_DIR=$dir/share/weft "$dir/bin/weft" bench "$COLL" --sizes "$SIZES" --ranks "$RANKS" --no-nccl $g \
        ${AB_ARGS:---iters 100 --warmup 20} --json 2>"$D/err" | grep '^{"collective"' >"$D/$mode.$which.$rep" ||
        echo "small_ab: $which $mode run $rep failed: $(tail -n 1 "$D/err")" >&2
    done
  done
done
python3 - "$D" "$COLL" <<'PY'
import json, os, sys
d, coll = sys.argv[1], sys.argv[2]
def rows(name):
    p = os.path.join(d, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
for mode in ("plain", "graph"):
    t = {}
    for which in ("base", "new"):
        for rep in (1, 2):
            for r in rows(f"{mode}.{which}.{rep}"):
                e = t.setdefault(r["bytes"], {"base": [], "new": [], "wrong": 0})
                e[which].append(r["weft_us"])
                e["wrong"] += r.get("weft_wrong", 0) or 0
    print(f"\n{coll}, {mode}: per-call us, base runs / new runs, base/new of the best run (above 1: new faster)\n")
    print("| bytes | base us | new us | base/new | #wrong |")
    print("| ---: | --- | --- | ---: | ---: |")
    for size in sorted(t):
        e = t[size]
        b, n = e["base"], e["new"]
        ratio = "%.2f" % (min(b) / min(n)) if b and n else "-"
        fmt = lambda v: " / ".join("%.2f" % x for x in v) or "-"
        print(f"| {size} | {fmt(b)} | {fmt(n)} | {ratio} | {e['wrong']} |")
PY
