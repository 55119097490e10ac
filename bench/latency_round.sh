#!/usr/bin/env bash
# Issue 32's small-message latency round (docs/runtime.md, "Where a small plan call's time
# goes"): `weft bench` of Broadcast, Reduce and AllReduce from 8 B to 1 MiB (factor 8) on all
# GPUs of the machine (2 or 4), plain and in CUDA graphs, beside NCCL, then the same in graphs
# with the generated-kernel executor, each protocol forced, the ring forced for AllReduce, the
# small Broadcast and Reduce rows on the hpds scheduler (one thread block per peer at the root
# instead of one for all), and two traced calls (Broadcast 8 B; ring AllReduce 32 KiB, LL).
# Prints one compact table (microseconds per call) and the traces' per-block spans.
#
#   bench/latency_round.sh BUNDLE        (BUNDLE from scripts/make_gpu_bundle.sh: bin/weft, lib/, share/weft)
#
# Environment: OUT (logs, default ./latency-out), ROUND_BUDGET_S (default 115: no step starts
# once it is spent, and each step's limit is cut to what is left), RANKS (default 0: every
# GPU), NCCL_LIB (a libnccl.so.2 for the NCCL columns; default: found as run_round_n.sh does,
# else the NCCL columns are empty), PY (python3).
set -u
B=$(cd "${1:?usage: bench/latency_round.sh BUNDLE}" && pwd -P)
W=$B/bin/weft
[ -x "$W" ] || { echo "latency_round.sh: $B has no bin/weft (make it with scripts/make_gpu_bundle.sh)" >&2; exit 2; }
OUT=${OUT:-$PWD/latency-out}
BUDGET=${ROUND_BUDGET_S:-115}
RANKS=${RANKS:-0}
PY=${PY:-python3}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=${WEFT_TIMEOUT:-20}
export WEFT_CACHE_DIR=$OUT/gen-cache
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }

# NCCL for the reference columns: a folder whose libnccl.so.2 is the real one.
NCCL=${NCCL_LIB:-}
if [ -z "$NCCL" ]; then
  for p in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
           /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 \
           "$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')"; do
    [ -n "$p" ] && [ -f "$p" ] && { NCCL=$p; break; }
  done
fi
NCCLDIR=""
if [ -n "$NCCL" ] && [ -f "$NCCL" ]; then
  NCCLDIR=$OUT/lib-nccl; mkdir -p "$NCCLDIR"; ln -sfn "$(readlink -f "$NCCL")" "$NCCLDIR/libnccl.so.2"
fi
LDP="${NCCLDIR:+$NCCLDIR:}${LD_LIBRARY_PATH:-}"

# step NAME LIMIT [VAR=VALUE...] -- BENCH_ARGS...: one `weft bench --json` into NAME.jsonl.
step() {
  local name=$1 t=$2 l envs=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  l=$(left)
  if [ "$l" -lt 8 ]; then echo "# $name: skipped (the round's budget is spent)"; return; fi
  [ "$t" -gt "$l" ] && t=$l
  local s
  s=$(date +%s)
  timeout -k 5 "$t" env LD_LIBRARY_PATH="$LDP" ${envs[@]+"${envs[@]}"} "$W" bench --ranks "$RANKS" --json --no-sim "$@" \
    > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  local rc=$?
  echo "# $name: rc=$rc, $(( $(date +%s) - s )) s, $(grep -c '^{' "$OUT/$name.jsonl") rows$( [ $rc = 0 ] || echo "; $(tail -n 1 "$OUT/$name.err" | cut -c1-120)")"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^/# machine: /'
echo "# GPUs: $(nvidia-smi -L 2>/dev/null | wc -l); NCCL: ${NCCL:-none}; bundle: $(head -n 1 "$B/BUNDLE_INFO" 2>/dev/null)"
C=(Broadcast Reduce AllReduce)
S=(--sizes 8:1M --factor 8)
NN=()  # the NCCL columns where NCCL was found
[ -n "$NCCLDIR" ] || NN=(--no-nccl)
step base_plain 20 -- "${C[@]}" "${S[@]}" ${NN[@]+"${NN[@]}"}
step base_graph 20 -- "${C[@]}" "${S[@]}" --graph ${NN[@]+"${NN[@]}"}
# Generated kernels: compiled at first use (the warm-up calls; the disk cache keeps them).
step gen_graph 30 WEFT_EXECUTOR=gen -- "${C[@]}" "${S[@]}" --graph --no-nccl
for p in LL LL128 Simple; do step "proto_${p}" 12 WEFT_PROTO=$p -- "${C[@]}" "${S[@]}" --graph --no-nccl; done
step ring_graph 12 WEFT_ALGO=AllReduce:ring_allreduce -- AllReduce "${S[@]}" --graph --no-nccl
# The default table with the small Broadcast and Reduce rows on the hpds scheduler.
if "$PY" - "$B/share/weft/selection/default.json" "$OUT/hpds.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
for r in t["rows"]:
    if r.get("algorithm") in ("allpairs_broadcast", "allpairs_reduce"):
        r["scheduler"] = "hpds"
json.dump(t, open(sys.argv[2], "w"), indent=1)
EOF
then step hpds_graph 12 WEFT_SELECTION="$OUT/hpds.json" -- Broadcast Reduce "${S[@]}" --graph --no-nccl
else echo "# hpds_graph: skipped (no selection/default.json in the bundle)"; fi
step trace_bcast8 12 -- Broadcast --sizes 8:8 --trace "$OUT/bcast8.json" --no-nccl
step trace_ring32k 12 WEFT_ALGO=AllReduce:ring_allreduce WEFT_PROTO=LL -- AllReduce --sizes 32K:32K --trace "$OUT/ring32k.json" --no-nccl

# The table: one row per (collective, bytes), microseconds per call.
"$PY" - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
cols = [("nccl", "base_plain", "nccl_us"), ("weft", "base_plain", "weft_us"), ("nccl_G", "base_graph", "nccl_us"),
        ("weft_G", "base_graph", "weft_us"), ("gen_G", "gen_graph", "weft_us"), ("LL_G", "proto_LL", "weft_us"),
        ("LL128_G", "proto_LL128", "weft_us"), ("Simple_G", "proto_Simple", "weft_us"), ("ring_G", "ring_graph", "weft_us"),
        ("hpds_G", "hpds_graph", "weft_us")]
rows, plan, tbs, wrong = {}, {}, {}, []
for _, step, _ in cols:
    p = os.path.join(out, step + ".jsonl")
    if not os.path.exists(p):
        continue
    for line in open(p):
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        key = (r["collective"], int(r["bytes"]))
        rows.setdefault(key, {})[step] = r
        if r.get("weft_wrong", 0) not in (0, -1):
            wrong.append((step,) + key)
        if step == "base_graph":
            plan[key], tbs[key] = str(r.get("weft_plan", "")), r.get("weft_tbs", "")
def cell(r, f):
    if r is None or f not in r or r[f] is None or r[f] <= 0:
        return "-"
    return "%.2f" % r[f]
print("| collective | bytes | " + " | ".join(c[0] for c in cols) + " | plan (graph) | blocks |")
print("| --- | ---: |" + " ---: |" * len(cols) + " --- | ---: |")
for key in sorted(rows, key=lambda k: (k[0], k[1])):
    d = rows[key]
    print("| %s | %d | " % key + " | ".join(cell(d.get(s), f) for _, s, f in cols) + " | %s | %s |" % (plan.get(key, ""), tbs.get(key, "")))
print("# wrong results: " + (", ".join("%s %s %d" % w for w in wrong) if wrong else "none"))
# Traces: per rank and thread block, the spans in order (name and microseconds; waits as 'wait').
for name in ("bcast8", "ring32k"):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        print("# trace %s: none" % name)
        continue
    t = json.load(open(p))
    ev = [e for e in t.get("traceEvents", []) if e.get("ph") == "X"]
    other = t.get("otherData", {})
    print("# trace %s: untraced %.2f us, traced span %.2f us" % (name, other.get("untraced_us", -1), other.get("time_us", -1)))
    by = {}
    for e in ev:
        by.setdefault((e["pid"], e["tid"]), []).append(e)
    for (rank, tb), es in sorted(by.items()):
        es.sort(key=lambda e: e["ts"])
        spans = " ".join("%s@%.1f+%.1f" % ("wait" if e["name"] == "wait" else e["name"].replace(" ", ""), e["ts"], e["dur"]) for e in es[:12])
        print("#   rank %d tb %d: %s%s" % (rank, tb, spans, " ..." if len(es) > 12 else ""))
EOF
echo "# elapsed $(( $(date +%s) - T0 )) s of ${BUDGET} s; logs in $OUT"
