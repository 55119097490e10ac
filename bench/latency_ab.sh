#!/usr/bin/env bash
# Issue 32's small-call switches against the behaviour before them, beside NCCL, in one device
# call of at most 120 s on all GPUs of the machine (docs/runtime.md, "The one-shot kernel" and
# "Where a small plan call's time goes"; docs/gpu-rounds.md):
#   - AllReduce 8 B - 32 KiB in CUDA graphs (the one-shot kernel): the default (every peer
#     polled at once), WEFT_ONESHOT_POLL=seq (the kernel as before), WEFT_ONESHOT_THREADS=64
#     and =128 (more blocks per call);
#   - Broadcast and Reduce 8 B - 32 KiB in graphs (plans on the interpreter): the default (as
#     before), WEFT_EXEC_WARM=1, WEFT_EXEC_LL_KERNEL=1, both, and the one-shot kernel
#     (WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot);
#   - AllReduce 256 KiB - 2 MiB plain (the one-shot kernel at 256 KiB, LL plans above): the
#     default and both interpreter switches;
# then the GPU tests of what the switches change: a peer that stops during a one-shot call
# (the timeout's error record), then with all switches on graph replays (Broadcast and Reduce
# on the one-shot kernel there) and the collectives on 4 counts (every type and op against the
# host reference).
# Prints one table (microseconds per call; above-1 ratios are not computed, read the columns)
# and one line per test.
#
#   bench/latency_ab.sh BUNDLE      (BUNDLE from scripts/make_gpu_bundle.sh: bin/weft, bin/weft_gpu_tests, lib/, share/weft)
#
# Environment: OUT (logs, default ./latency-ab-out), ROUND_BUDGET_S (default 115: no step
# starts once it is spent, each step's limit is cut to what is left), TEST_RESERVE_S (default
# 50: the benchmarks stop this long before the budget's end, for the tests), RANKS (default 0:
# every GPU), NCCL_LIB (as bench/latency_round.sh), AB_ITERS (default 50), PY (python3).
set -u
B=$(cd "${1:?usage: bench/latency_ab.sh BUNDLE}" && pwd -P)
W=$B/bin/weft
[ -x "$W" ] || { echo "latency_ab.sh: $B has no bin/weft (make it with scripts/make_gpu_bundle.sh)" >&2; exit 2; }
OUT=${OUT:-$PWD/latency-ab-out}
BUDGET=${ROUND_BUDGET_S:-115}
RESERVE=${TEST_RESERVE_S:-50}
RANKS=${RANKS:-0}
ITERS=${AB_ITERS:-50}
PY=${PY:-python3}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=${WEFT_TIMEOUT:-20}
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
TR=$RANKS; [ "$TR" = 0 ] && TR=$NGPU

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
NN=(); [ -n "$NCCLDIR" ] || NN=(--no-nccl)

# bench NAME LIMIT [VAR=VALUE...] -- BENCH_ARGS...: one `weft bench --json` into NAME.jsonl,
# skipped once less than the tests' reserve is left.
bench() {
  local name=$1 t=$2 l envs=() s rc
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  l=$(( $(left) - RESERVE ))
  if [ "$l" -lt 5 ]; then echo "# $name: skipped (budget)"; return; fi
  [ "$t" -gt "$l" ] && t=$l
  s=$(date +%s)
  timeout -k 3 "$t" env LD_LIBRARY_PATH="$LDP" ${envs[@]+"${envs[@]}"} "$W" bench --ranks "$RANKS" --json --no-sim \
    --iters "$ITERS" --warmup 10 "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  rc=$?
  echo "# $name: rc=$rc, $(( $(date +%s) - s )) s, $(grep -c '^{' "$OUT/$name.jsonl") rows$( [ $rc = 0 ] || echo "; $(tail -n 1 "$OUT/$name.err" | cut -c1-120)")"
}
# gtest NAME LIMIT [VAR=VALUE...] -- ARGS...: one weft_gpu_tests run, one line.
gtest() {
  local name=$1 t=$2 l envs=() s rc
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  l=$(left)
  if [ "$l" -lt 5 ]; then echo "# test $name: NOT RUN (budget)"; return; fi
  [ "$t" -gt "$l" ] && t=$l
  s=$(date +%s)
  timeout -k 3 "$t" env ${envs[@]+"${envs[@]}"} "$B/bin/weft_gpu_tests" "$@" > "$OUT/test_$name.log" 2>&1
  rc=$?
  echo "# test $name: rc=$rc $( [ $rc = 0 ] && echo PASS || echo FAIL), $(( $(date +%s) - s )) s: $(tail -n 1 "$OUT/test_$name.log" | cut -c1-140)"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^/# machine: /'
echo "# GPUs: $NGPU; ranks: $TR; NCCL: ${NCCL:-none}; bundle: $(head -n 1 "$B/BUNDLE_INFO" 2>/dev/null)"
AR=(AllReduce --sizes 8:32K --factor 8 --graph)
BR=(Broadcast Reduce --sizes 8:32K --factor 8 --graph)
MID=(AllReduce --sizes 256K:2M --factor 2)
bench ar_new 16 -- "${AR[@]}" ${NN[@]+"${NN[@]}"}
bench ar_seq 10 WEFT_ONESHOT_POLL=seq -- "${AR[@]}" --no-nccl
bench ar_t64 10 WEFT_ONESHOT_THREADS=64 -- "${AR[@]}" --no-nccl
bench ar_t128 10 WEFT_ONESHOT_THREADS=128 -- "${AR[@]}" --no-nccl
bench br_base 18 -- "${BR[@]}" ${NN[@]+"${NN[@]}"}
bench br_warm 10 WEFT_EXEC_WARM=1 -- "${BR[@]}" --no-nccl
bench br_llk 10 WEFT_EXEC_LL_KERNEL=1 -- "${BR[@]}" --no-nccl
bench br_both 10 WEFT_EXEC_WARM=1 WEFT_EXEC_LL_KERNEL=1 -- "${BR[@]}" --no-nccl
bench br_oneshot 10 WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot -- "${BR[@]}" --no-nccl
bench mid_base 12 -- "${MID[@]}" ${NN[@]+"${NN[@]}"}
bench mid_both 8 WEFT_EXEC_WARM=1 WEFT_EXEC_LL_KERNEL=1 -- "${MID[@]}" --no-nccl

"$PY" - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
cols = [("nccl", "ar_new", "nccl_us"), ("new", "ar_new", "weft_us"), ("seq (old)", "ar_seq", "weft_us"),
        ("threads64", "ar_t64", "weft_us"), ("threads128", "ar_t128", "weft_us"),
        ("nccl", "br_base", "nccl_us"), ("base (old)", "br_base", "weft_us"), ("warm", "br_warm", "weft_us"),
        ("ll_kernel", "br_llk", "weft_us"), ("warm+ll_kernel", "br_both", "weft_us"), ("oneshot", "br_oneshot", "weft_us"),
        ("nccl", "mid_base", "nccl_us"), ("base (old)", "mid_base", "weft_us"), ("warm+ll_kernel", "mid_both", "weft_us")]
groups = [("AllReduce in CUDA graphs (one-shot kernel)", cols[0:5]), ("Broadcast and Reduce in CUDA graphs", cols[5:11]),
          ("AllReduce plain, mid sizes", cols[11:14])]
rows, wrong = {}, []
for _, step, _ in cols:
    p = os.path.join(out, step + ".jsonl")
    if not os.path.exists(p):
        continue
    for line in open(p):
        try:
            r = json.loads(line) if line.startswith("{") else None
        except ValueError:
            r = None
        if r is None:
            continue
        key = (r["collective"], int(r["bytes"]))
        rows.setdefault(step, {})[key] = r
        if r.get("weft_wrong", 0) not in (0, -1, None):
            wrong.append("%s %s %d" % ((step,) + key))
def cell(step, key, f):
    r = rows.get(step, {}).get(key)
    return "-" if r is None or r.get(f) is None or r[f] <= 0 else "%.2f" % r[f]
for title, cs in groups:
    keys = sorted({k for _, s, _ in cs for k in rows.get(s, {})})
    print("\n%s: us per call\n" % title)
    print("| collective | bytes | " + " | ".join(c[0] for c in cs) + " | plan | blocks |")
    print("| --- | ---: |" + " ---: |" * len(cs) + " --- | ---: |")
    for k in keys:
        r0 = rows.get(cs[1][1], {}).get(k, {})
        print("| %s | %d | " % k + " | ".join(cell(s, k, f) for _, s, f in cs) +
              " | %s | %s |" % (r0.get("weft_plan", ""), r0.get("weft_tbs", "")))
print("\n# wrong results: " + (", ".join(wrong) if wrong else "none"))
EOF

# The tests: every switch on (the one-shot kernel with more blocks, the interpreter's two).
ON=(WEFT_ONESHOT_THREADS=64 WEFT_EXEC_WARM=1 WEFT_EXEC_LL_KERNEL=1)
gtest peer_stops_oneshot 25 -- peer_stops --counts 1024
gtest graph 25 "${ON[@]}" WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot -- graph --ranks "$TR"
gtest collectives 60 "${ON[@]}" -- collectives --ranks "$TR" --counts 7,1024,16385,65537
echo "# elapsed $(( $(date +%s) - T0 )) s of ${BUDGET} s; logs in $OUT"
