#!/usr/bin/env bash
# The network round (issue 29, docs/port-channels.md "Measuring the network path"): on a
# machine with 2 GPUs, `weft bench AllReduce AllGather` across 2 emulated nodes
# (WEFT_EMULATE_NODES=2: every byte between the ranks goes GPU -> proxy -> UCX -> proxy ->
# GPU) against NCCL forced onto its socket transport in the same run, 1 MiB to 1 GiB by
# factors of 4, then the ratio table. About 60 to 150 s.
#
# Usage: bench/net_round.sh BUNDLE        (a bundle of scripts/make_gpu_bundle.sh: BUNDLE/bin/weft)
# Environment (all optional):
#   OUT               where the logs go (default ./net-round-out)
#   NET_ROUND_SIM=0   leave out the simulator's column (default: simulated on
#                     bench/net/h200-emulated-2x1.json, the network model to calibrate)
#   NET_ROUND_LARGE   the large range (default 64M:1G; 64M:256M keeps the round near 100 s), by factors of 4
#   NET_ROUND_FACTOR  the small range's factor (default 4: 1, 4, 16 MiB; 16: 1 and 16 MiB)
#   NET_ROUND_TRACE=1 also trace one 256 MiB AllReduce (WEFT_NET_TRACE) and print the proxies' summaries
#                     and bench/net_trace_overlap.py's stages (messages in flight at once, wire latency)
#   NET_ROUND_AB=1    also run weft alone (--no-nccl) over both ranges with the network path as it was
#                     before issue 29's segments and active messages (WEFT_NET_PROTO=put
#                     WEFT_NET_TCP_SEG_BYTES=0): a column "weft before" beside the table's
#   NET_ROUND_SWEEP   variants of weft alone (--no-nccl) over both ranges, one column each: a
#                     space-separated list, each VAR=VALUE[,VAR=VALUE...], e.g.
#                     "WEFT_NET_LANES=0 WEFT_NET_LANES=8 WEFT_NET_LANES=8,WEFT_NET_STRIPE_BYTES=65536";
#                     the column is named by the variant without its WEFT_NET_ prefixes ("weft LANES=0")
#   NET_ROUND_ALGOS   algorithms forced with WEFT_ALGO, weft alone (--no-nccl) over NET_ROUND_ALGO_SIZES,
#                     a column each "weft hm" / "weft ring" / "weft allpairs" (default "hm ring allpairs";
#                     "" leaves them out); where both ran, a column "hm/ring"
#   NET_ROUND_ALGO_SIZES  their sizes, by factors of 16 (default 1M:256M: 1, 16 and 256 MiB)
#   NET_ROUND_RANKS4  1: also 4 ranks as 2 emulated nodes of 2 (only the links between nodes over UCX),
#                     weft vs NCCL sockets and the algorithms at NET_ROUND_ALGO_SIZES, a second table
#                     (default: 1 where nvidia-smi lists 4 GPUs or more)
#   UCX_TLS, UCX_NET_DEVICES, WEFT_NET_ORDER, WEFT_PROXY_CPUS, ...  passed through as set
# NCCL runs in the same rank processes as weft (weft bench loads libnccl.so.2 there), so the
# NCCL_* variables below reach it: no peer-to-peer, no shared memory, the socket transport.
set -u
B=${1:?usage: bench/net_round.sh BUNDLE}
HERE=$(cd "$(dirname "$0")" && pwd -P)
WEFT=$B/bin/weft
[ -x "$WEFT" ] || { echo "net_round.sh: no $WEFT (make the bundle with scripts/make_gpu_bundle.sh)" >&2; exit 2; }
OUT=${OUT:-$PWD/net-round-out}
mkdir -p "$OUT"
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_NVLS_ENABLE=0
export WEFT_EMULATE_NODES=2 WEFT_LOG_LEVEL=${WEFT_LOG_LEVEL:-INFO} WEFT_LOG_SUBSYS=${WEFT_LOG_SUBSYS:-NET,PROXY,INIT}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 2 ] || echo "# net_round.sh: $gpus GPU(s): both ranks share one (correctness, not speed)"
SIM=()
[ "${NET_ROUND_SIM:-1}" = 1 ] && SIM=(-t "$HERE/net/h200-emulated-2x1.json")
[ "${NET_ROUND_SIM:-1}" = 1 ] || SIM=(--no-sim)

start=$(date +%s)
{
  echo "# weft network round, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  echo "# $("$WEFT" env 2>/dev/null | tail -n 1)"
  echo "# NCCL: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket; weft: WEFT_EMULATE_NODES=2 ${UCX_TLS:+UCX_TLS=$UCX_TLS }${WEFT_NET_ORDER:+WEFT_NET_ORDER=$WEFT_NET_ORDER }${WEFT_NET_LANES:+WEFT_NET_LANES=$WEFT_NET_LANES}"
} | tee "$OUT/summary.txt"

bench() {  # bench NAME TIMEOUT SIZES WARMUP ITERS [EXTRA ARGS...]; RANKS (default 2), FACTOR_OF (default by name)
  local name=$1 t=$2 sizes=$3 warm=$4 iters=$5
  shift 5
  local extra=("$@")
  [ ${#extra[@]} -eq 0 ] && extra=("${SIM[@]}")
  local factor=4
  case $name in *small) factor=$FACTOR ;; esac
  [ -n "${FACTOR_OF:-}" ] && factor=$FACTOR_OF
  timeout -k 5 "$t" "$WEFT" bench AllReduce AllGather --ranks "${RANKS:-2}" --sizes "$sizes" --factor "$factor" --warmup "$warm" \
    --iters "$iters" --json "${extra[@]}" > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
  local rc=$?
  [ $rc -eq 124 ] && echo "# $name ($sizes) timed out after $t s: rows missing below are that" | tee -a "$OUT/summary.txt"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "# $name ($sizes) exited $rc: $(tail -n 2 "$OUT/$name.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  return 0
}
LARGE=${NET_ROUND_LARGE:-64M:1G}
FACTOR=${NET_ROUND_FACTOR:-4}
bench small 50 1M:16M 3 10
bench large 90 "$LARGE" 1 3
if [ "${NET_ROUND_AB:-0}" = 1 ]; then
  WEFT_NET_PROTO=put WEFT_NET_TCP_SEG_BYTES=0 bench variant_before_small 40 1M:16M 3 10 --no-nccl --no-sim
  WEFT_NET_PROTO=put WEFT_NET_TCP_SEG_BYTES=0 bench variant_before_large 60 "$LARGE" 1 3 --no-nccl --no-sim
fi
VARIANT_NAMES="before"
n=0
for v in ${NET_ROUND_SWEEP:-}; do
  n=$((n + 1))
  label=$(echo "$v" | sed 's/WEFT_NET_//g')
  echo "$label" > "$OUT/variant_s$n.name"
  VARIANT_NAMES="$VARIANT_NAMES s$n"
  (IFS=,; for kv in $v; do export "${kv?}"; done; unset IFS
   bench variant_s${n}_small 30 1M:16M 3 10 --no-nccl --no-sim
   bench variant_s${n}_large 45 "$LARGE" 1 3 --no-nccl --no-sim)
done

ALGO_SIZES=${NET_ROUND_ALGO_SIZES:-1M:256M}
algo_env() {  # the WEFT_ALGO of a NET_ROUND_ALGOS name
  case $1 in
    hm) echo "AllReduce:hm_allreduce,AllGather:hm_allgather" ;;
    ring) echo "AllReduce:ring_allreduce,AllGather:ring_allgather" ;;
    allpairs) echo "AllReduce:allpairs,AllGather:allpairs_allgather" ;;
    *) echo "net_round.sh: NET_ROUND_ALGOS: unknown '$1' (hm, ring or allpairs)" >&2; return 1 ;;
  esac
}
algos() {  # algos PREFIX: each NET_ROUND_ALGOS name forced, weft alone, as variants PREFIXa_NAME
  local a
  for a in ${NET_ROUND_ALGOS-hm ring allpairs}; do
    local algo
    algo=$(algo_env "$a") || continue
    echo "$a" > "$OUT/variant_${1}a_$a.name"
    VARIANTS_OF="$VARIANTS_OF ${1}a_$a"
    WEFT_ALGO=$algo FACTOR_OF=16 bench "variant_${1}a_${a}_all" 60 "$ALGO_SIZES" 1 3 --no-nccl --no-sim
  done
}
VARIANTS_OF=""
algos ""
VARIANT_NAMES="$VARIANT_NAMES$VARIANTS_OF"
RANKS4=${NET_ROUND_RANKS4:-0}
[ "$gpus" -ge 4 ] && RANKS4=${NET_ROUND_RANKS4:-1}
if [ "$RANKS4" = 1 ]; then
  RANKS=4 FACTOR_OF=16 bench r4_main 90 "$ALGO_SIZES" 1 3 --no-sim
  VARIANTS_OF=""
  RANKS=4 algos r4_
  R4_VARIANTS=$VARIANTS_OF
fi

# What ran: UCX's lanes, where the proxies sit, direct or staged.
grep -h -E "UCX transport of rank 0|UCX to rank|peers on other nodes|proxy of rank [0-9]+: thread|selection from" "$OUT"/small.log 2>/dev/null |
  sed 's/^/# /' | sort -u | head -n 9 | tee -a "$OUT/summary.txt"

if [ "${NET_ROUND_TRACE:-0}" = 1 ]; then
  WEFT_NET_TRACE=$OUT/trace timeout -k 5 60 "$WEFT" bench AllReduce --ranks 2 --sizes 256M:256M --warmup 1 --iters 2 \
    --no-sim > "$OUT/trace.out" 2> "$OUT/trace.log"
  grep -h "network trace" "$OUT/trace.log" | sed 's/^/# /' | tee -a "$OUT/summary.txt"
  python3 "$HERE/net_trace_overlap.py" "$OUT"/trace.*.tsv 2>&1 | tee -a "$OUT/summary.txt"
fi

table() {  # table MAIN_JSONL_FILES... -- VARIANT_IDS: the ratio table, a column per variant
  local files=() v name
  while [ "$1" != -- ]; do files+=("$1"); shift; done
  shift
  cat "${files[@]}" 2>/dev/null | VARIANTS="$(cd "$OUT" && for v in "$@"; do
    name=$v; [ -f "variant_$v.name" ] && name=$(cat "variant_$v.name")
    cat variant_${v}_*.jsonl 2>/dev/null | sed "s/^/$name /"; done)" python3 -c '
import json, os, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
variants = {}  # name -> {(collective, bytes): weft busbw}, in the order they come
for l in os.environ.get("VARIANTS", "").splitlines():
    name, _, js = l.partition(" ")
    if js.startswith("{"):
        r = json.loads(js)
        variants.setdefault(name, {})[(r["collective"], r["bytes"])] = r["weft_busbw"]
hmring = "hm" in variants and "ring" in variants
cols = "".join(" weft %s |" % v for v in variants) + (" hm/ring |" if hmring else "")
print("| collective | bytes | weft busbw GB/s | NCCL sockets busbw | ratio |%s weft us | sim us | sim err %% | weft TBs | weft plan |" % cols)
print("| --- | --- | --- | --- | --- |%s --- | --- | --- | --- | --- |" % (" --- |" * (len(variants) + hmring)))
worst = None
for r in rows:
    w, n = r["weft_busbw"], r["nccl_busbw"]
    ratio = w / n if n > 0 else float("nan")
    worst = ratio if worst is None or ratio < worst else worst
    wrong = "" if r["weft_wrong"] == 0 else " (%d wrong)" % r["weft_wrong"]
    sim = "-" if r["sim_us"] is None else "%.0f" % r["sim_us"]
    err = "-" if r["sim_err_pct"] is None else "%.1f" % r["sim_err_pct"]
    b = r["bytes"]
    size = "%d GiB" % (b >> 30) if b >= 1 << 30 else "%d MiB" % (b >> 20)
    key = (r["collective"], b)
    old = "".join(" %.2f |" % v[key] if key in v else " - |" for v in variants.values())
    if hmring:
        hm, ring = variants["hm"].get(key), variants["ring"].get(key)
        old += " %.2f |" % (hm / ring) if hm and ring else " - |"
    print("| %s | %s | %.2f%s | %.2f | %.2f |%s %.0f | %s | %s | %d | %s |" % (r["collective"], size, w, wrong, n, ratio, old, r["weft_us"], sim, err, r["weft_tbs"], r["weft_plan"]))
print("# %d rows; lowest ratio %s (target: 1.0 or more at every size)" % (len(rows), "-" if worst is None else "%.2f" % worst))
' 2>&1 | tee -a "$OUT/summary.txt"
}
table "$OUT"/small.jsonl "$OUT"/large.jsonl -- $VARIANT_NAMES
if [ "$RANKS4" = 1 ]; then
  echo "# 4 ranks as 2 emulated nodes of 2 (links between nodes over UCX; target: hm/ring 1.3 or more from 16 MiB)" |
    tee -a "$OUT/summary.txt"
  table "$OUT"/r4_main.jsonl -- $R4_VARIANTS
fi
echo "# net_round.sh: $(( $(date +%s) - start )) s; logs in $OUT" | tee -a "$OUT/summary.txt"
