#!/usr/bin/env bash
# Issue 32's round on every GPU of a one-host machine (nvidia-h200-x2 / nvidia-h100-x2,
# nvidia-h200-x4 / nvidia-h100-x4; N = the GPUs nvidia-smi lists, 2 or more), from bundles
# made by scripts/make_gpu_bundle.sh, in one device call (docs/gpu-rounds.md):
#   a. machine facts;  b. nccl-tests built on the machine in the background;
#   c. `weft bench AllReduce --sizes 8:64K`, plain and --graph, the new bundle against
#      BASE_BUNDLE interleaved (base, new, base, new);
#   d. the gate: weft_gpu_tests collectives and graph on N ranks (a failure stops weft's
#      nccl-tests rows);
#   e. nccl-tests' 7 collectives with mpirun -np N, -b 8 -e 1G -f 8, on weft's libnccl.so.2
#      and on the machine's NCCL, plain, then with -G 20;
#   f. if time is left: bench/part_round.sh, HM against ring, the PyTorch check.
# Then the tables (scripts/round_n_tables.py) and the one-line summary of every step, last.
#
# Usage: run_round_n.sh BUNDLE [BASE_BUNDLE] [--part 1|2]
#   --part 1   a-d and e plain;  --part 2   a, b (reused), d, e graph and f: the second
#              call on the same warm machine when one call cannot hold everything.
# Environment: OUT (default /tmp/weft-round-n), ROUND_BUDGET_S (530: no step starts later and
# every step's timeout is cut to what is left), ROUND_MIN_LEFT_S (15: no step starts with
# less left), ROUND_STEP_CAP_S (a cap on every timeout; the dry run uses it), SKIP_STEPS
# (step names), NT_ARGS (-b 8 -e 1G -f 8 -g 1 -n 20 -w 5 -c 1), NT_GRAPH_ARGS (-G 20), NT_EXTRA (more nccl-tests variants: r1 r2 zero eff;
# round_nccltests.sh), NT_BIG_ARGS (the sizes of zero and eff),
# NT_SRC (nccl-tests' source), NT_BUILD_DIR (/tmp/weft-nccl-tests-build), NT_HEADER
# (weft | machine), SMALL_ARGS (--iters 100 --warmup 20), PY (python with torch), ROUND_TUNE
# (FROM:TO: `weft tune` first, the round then runs its table; ROUND_TUNE_S, default 240).
# Writes at most 8 files under $OUT: summary.txt, all.log, machine.log, bench.csv,
# nccltests.log, tables.md, part.txt. Exit 0 when nothing failed, 1 otherwise, 2 on a bad
# bundle, 77 with fewer than 2 GPUs.
# shellcheck disable=SC2086,SC2015,SC2012  # $SMALL_ARGS and $WBENCH_ENV are split on purpose
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
PART=all; ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --part) PART=${2:-}; shift 2 ;;
    --part=*) PART=${1#--part=}; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
case $PART in all|1|2) ;; *) echo "run_round_n.sh: --part takes 1 or 2, not '$PART'" >&2; exit 2 ;; esac
[ ${#ARGS[@]} -ge 1 ] && [ ${#ARGS[@]} -le 2 ] || { echo "usage: run_round_n.sh BUNDLE [BASE_BUNDLE] [--part 1|2]" >&2; exit 2; }
B=$(cd "${ARGS[0]}" 2>/dev/null && pwd) || { echo "run_round_n.sh: no bundle folder '${ARGS[0]}'" >&2; exit 2; }
BASE=""
if [ ${#ARGS[@]} = 2 ]; then BASE=$(cd "${ARGS[1]}" 2>/dev/null && pwd) || { echo "run_round_n.sh: no base bundle folder '${ARGS[1]}'" >&2; exit 2; }; fi
BUDGET=${ROUND_BUDGET_S:-530}
OUT=${OUT:-/tmp/weft-round-n}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/weft-round-n-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
SUMMARY=$OUT/summary.txt; ALL=$OUT/all.log
: >"$SUMMARY"; : >"$ALL"; : >"$OUT/nccltests.log"
ORIG_LD=${LD_LIBRARY_PATH:-}
# Each bundle's binaries find their own lib/ through RUNPATH; LD_LIBRARY_PATH would override
# that, so it never names a bundle's lib/ here.
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=${WEFT_TIMEOUT:-20} WEFT_BOOTSTRAP_TIMEOUT=${WEFT_BOOTSTRAP_TIMEOUT:-30}
export WEFT_LOG_LEVEL=${WEFT_LOG_LEVEL:-WARN}
NT_ARGS=${NT_ARGS:--b 8 -e 1G -f 8 -g 1 -n 20 -w 5 -c 1}
NT_GRAPH_ARGS=${NT_GRAPH_ARGS:--G 20}
NTB=${NT_BUILD_DIR:-/tmp/weft-nccl-tests-build}
FAILS=0; WEFT_ROWS=ok; LAST_RC=0; LAST_DT=0
chmod +x "$B"/bin/* ${BASE:+"$BASE"/bin/*} 2>/dev/null   # in case a copy lost the execute bits
# shellcheck source=tests/gpu/round_nccltests.sh
. "$HERE/round_nccltests.sh"

note() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(elapsed) )); }

# step NAME TIMEOUT CMD...: CMD under `timeout`, cut to the budget left (and ROUND_STEP_CAP_S);
# its output in $TMP/NAME.log and all.log; one summary line (rc, seconds, and its last line or
# what `$STEP_DESC LOG` says). Sets LAST_RC (NOTRUN when it did not start) and LAST_DT.
step() {
  local name=$1 t=$2; shift 2
  LAST_RC=NOTRUN; LAST_DT=0
  case " ${SKIP_STEPS:-} " in *" $name "*) note "$(printf '%-28s skipped (SKIP_STEPS)' "$name")"; return;; esac
  if [ "$(left)" -lt "${ROUND_MIN_LEFT_S:-15}" ]; then note "$(printf '%-28s NOT RUN (round budget of %s s spent)' "$name" "$BUDGET")"; return; fi
  [ "$t" -gt "$(left)" ] && t=$(left)
  [ -n "${ROUND_STEP_CAP_S:-}" ] && [ "$t" -gt "$ROUND_STEP_CAP_S" ] && t=$ROUND_STEP_CAP_S
  local log=$TMP/$name.log t0 rc tail
  t0=$(date +%s.%N)
  timeout -k 5 "$t" "$@" >"$log" 2>&1
  rc=$?
  LAST_DT=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && rc="$rc(timeout ${t}s)"
  LAST_RC=$rc
  if [ -n "${STEP_DESC:-}" ]; then tail=$("$STEP_DESC" "$log"); else tail=$(grep -v '^ *$' "$log" | tail -n 1 | cut -c1-150); fi
  note "$(printf '%-28s rc=%-3s %6ss  %s' "$name" "$rc" "$LAST_DT" "$tail")"
  { echo "==== $name (rc=$rc, ${LAST_DT}s, limit ${t}s): $*"; cat "$log"; } >>"$ALL"
}

# ---- a. machine facts -------------------------------------------------------------------
PY=${PY:-}
[ -z "$PY" ] && for p in /opt/torch/.venv/bin/python3 python3; do command -v "$p" >/dev/null 2>&1 && PY=$(command -v "$p") && break; done
nt_find_real_nccl
nt_find_mpi
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  cores: $(nproc)  part: $PART"
  timeout 20 nvidia-smi -L
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  timeout 20 nvidia-smi topo -m
  echo "NCCL: ${REALNCCL:-none found} (version $REALNCCL_VER), header ${REALNCCL_H:-none found}"
  echo "mpirun: ${MPIRUN:-none}${MPIRUN:+ ($(timeout 10 "$MPIRUN" --version 2>&1 | head -n 1))}, mpi.h in ${MPIINC:-?}, libmpi.so in ${MPILIB:-?}"
  echo "nvcc: $(timeout 10 nvcc --version 2>/dev/null | tail -n 1)"
  echo "python: ${PY:-none}${PY:+ $(timeout 30 "$PY" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -n 1)}"
  for b in "$B" $BASE; do echo "bundle: $b"; ls -la "$b" "$b/bin" "$b/lib"; cat "$b/BUNDLE_INFO" 2>/dev/null; done
} >"$OUT/machine.log" 2>&1
N=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
note "machine: $N x $(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), driver $(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1); part $PART"
note "links: $(timeout 20 nvidia-smi topo -m 2>/dev/null | awk '/^GPU0/{for (i = 2; i <= NF; ++i) if ($i ~ /^NV/) printf "%s ", $i; exit}')(GPU0 to its peers)"
note "NCCL: ${REALNCCL:-none found} (${REALNCCL_VER}); mpirun: ${MPIRUN:-none}"
note "bundle: $(sed -n 's/^commit: //p' "$B/BUNDLE_INFO" 2>/dev/null)${BASE:+; base: $(sed -n 's/^commit: //p' "$BASE/BUNDLE_INFO" 2>/dev/null)}"
[ -x "$B/bin/weft" ] || { note "the bundle $B lacks bin/weft: make it with scripts/make_gpu_bundle.sh"; exit 2; }
[ -z "$BASE" ] || [ -x "$BASE/bin/weft" ] || { note "the base bundle $BASE lacks bin/weft"; exit 2; }
if [ "$N" -lt 2 ]; then note "this round wants 2 or more GPUs (found $N)"; exit 77; fi

# ---- b. nccl-tests, built in the background ---------------------------------------------------
NT_SRC=${NT_SRC:-}
[ -z "$NT_SRC" ] && for s in "$B/nccl-tests-src" "$PWD/nccl-carry/nccl-tests-src"; do [ -f "$s/src/Makefile" ] && NT_SRC=$s && break; done
NT_SUFFIX=""; NT_MODE="t$N"
if [ -n "$MPIRUN" ] && [ -n "$MPIINC" ] && [ -n "$MPILIB" ]; then NT_SUFFIX=_mpi; NT_MODE="mpi$N"; fi
NTPID=""; NT_T0=$(date +%s)
if [ -z "$NT_SRC" ]; then
  note "nt_build: no nccl-tests source (bundle's nccl-tests-src/, ./nccl-carry/nccl-tests-src, NT_SRC): nccl-tests not run"
elif [ "$(left)" -gt 60 ]; then
  nt_build "$NT_SRC" "$NTB" $(( $(left) - 30 )) >"$TMP/nt_build.log" 2>&1 &
  NTPID=$!
fi
nt_wait_build() {  # waits for the build while the budget allows; notes its line once
  [ -n "$NTPID" ] || return 0
  while kill -0 "$NTPID" 2>/dev/null && [ "$(left)" -gt "${ROUND_MIN_LEFT_S:-15}" ]; do sleep 1; done
  kill -0 "$NTPID" 2>/dev/null && kill -- "$NTPID" 2>/dev/null
  wait "$NTPID"; local rc=$?
  note "$(printf '%-28s rc=%-3s %6ss  %s' nt_build "$rc" "$(( $(date +%s) - NT_T0 ))" "$(grep -v '^ *$' "$TMP/nt_build.log" | tail -n 1 | cut -c1-150)")"
  { echo "==== nt_build (rc=$rc)"; tail -n 60 "$TMP/nt_build.log"; } >>"$ALL"
  NTPID=""; NT_BUILD_RC=$rc
}
NT_BUILD_RC=none

# ---- c. small AllReduce: the new bundle against the base, interleaved ---------------------------
echo "step,bundle,rep,mode,collective,bytes,weft_us,weft_busbw,weft_wrong,weft_tbs,nccl_us,nccl_busbw,nccl_wrong" >"$OUT/bench.csv"
NCCLDIR=$(nt_libdir nccl || true)
# append_rows STEP BUNDLE REP MODE: the step's --csv rows (columns found by name), else the
# rows of the table it printed before a timeout.
append_rows() {
  local csv=$TMP/$1.csv
  if [ -s "$csv" ]; then
    awk -F, -v pre="$1,$2,$3,$4" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
      { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", pre, $c["collective"], $c["bytes"], $c["weft_us"], $c["weft_busbw"],
               $c["weft_wrong"], $c["weft_tbs"], $c["nccl_us"], $c["nccl_busbw"], $c["nccl_wrong"] }' "$csv" >>"$OUT/bench.csv"
  elif [ -f "$TMP/$1.log" ]; then
    awk -v pre="$1,$2,$3,$4" '/^# [A-Za-z]+  / { coll = $2 }
      /^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +\|/ { split($0, p, "|"); split(p[1], a, " "); split(p[2], w, " "); split(p[3], n, " ")
        if (n[1] ~ /^-+$/) { n[1] = 0; n[3] = 0; n[4] = -1 }
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", pre, coll, a[1], w[1], w[3], w[4], w[5], n[1], n[3], n[4] }' "$TMP/$1.log" >>"$OUT/bench.csv"
  fi
}
# bench_describe LOG: one summary line for a `weft bench` step (rows, #wrong, first and last row).
bench_describe() {
  awk '/^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +\|/ { split($0, p, "|"); split(p[1], a, " "); split(p[2], w, " "); split(p[3], n, " ")
         rows++; if (w[4] ~ /^[0-9]+$/) wrong += w[4]
         r = a[1] " B: weft " w[1] " us" (n[1] ~ /^-+$/ ? "" : ", NCCL " n[1] " us"); if (rows == 1) first = r; last = r }
       END { printf "rows %d, #wrong %d; %s%s\n", rows, wrong, first, (rows > 1 ? "; " last : "") }' "$1"
}
# wbench STEP BUNDLE_DIR BUNDLE_NAME REP MODE ARGS...: `weft bench` of that bundle, NCCL beside
# it (unless ARGS say --no-nccl), with the variables of WBENCH_ENV ("A=1 B=2") set.
wbench() {
  local name=$1 dir=$2 bname=$3 rep=$4 mode=$5 nosim=""; shift 5
  "$dir/bin/weft" bench --help 2>&1 | grep -q -- --no-sim && nosim=--no-sim
  STEP_DESC=bench_describe step "$name" "${WBENCH_LIMIT:-60}" env LD_LIBRARY_PATH="${NCCLDIR:+$NCCLDIR:}$ORIG_LD" WEFT_DATA_DIR="$dir/share/weft" \
    ${WBENCH_ENV:-} "$dir/bin/weft" bench "$@" $nosim --csv "$TMP/$name.csv"
  append_rows "$name" "$bname" "$rep" "$mode"
}
if [ "$PART" != 2 ]; then
  SMALL_ARGS=${SMALL_ARGS:---iters 100 --warmup 20}
  for mode in plain graph; do
    g=""; [ "$mode" = graph ] && g=--graph
    for rep in 1 2; do
      [ -n "$BASE" ] && wbench "small_${mode}_base$rep" "$BASE" base "$rep" "$mode" AllReduce --sizes 8:64K $SMALL_ARGS $g
      wbench "small_${mode}_new$rep" "$B" new "$rep" "$mode" AllReduce --sizes 8:64K $SMALL_ARGS $g
    done
  done
fi

# ---- c2. ROUND_TUNE=FROM:TO: `weft tune` on the N GPUs, and the rest of the round on its table --
# (issue 32 item 4). The six collectives, factor 8 (nccl-tests' rows), 8 and 24 blocks per link,
# pruned (docs/tune.md). The table with weft's default rows after the tuned ones becomes
# WEFT_SELECTION for the gate and nccl-tests (in-place calls take the default rows); the tuned
# rows alone go to $OUT/ranks-N.json, the shape selection/ranks-N.json ships in.
if [ -n "${ROUND_TUNE:-}" ]; then
  step "tune_$N" "${ROUND_TUNE_S:-240}" env LD_LIBRARY_PATH="$ORIG_LD" WEFT_DATA_DIR="$B/share/weft" "$B/bin/weft" tune \
    AllReduce ReduceScatter AllGather Broadcast Reduce AllToAll --sizes "$ROUND_TUNE" --factor 8 --ranks "$N" \
    --instances 8,24 -o "$TMP/tuned-$N.json"
  if [ "$LAST_RC" = 0 ] && [ -s "$TMP/tuned-$N.json" ]; then
    export WEFT_SELECTION=$TMP/tuned-$N.json
    TR=""; for p in "$B/tuned_rows.py" "$HERE/../../scripts/tuned_rows.py"; do [ -f "$p" ] && TR=$p && break; done
    python3 "$TR" "$TMP/tuned-$N.json" "$OUT/ranks-$N.json" >>"$ALL" 2>&1 ||
      note "tuned_rows.py failed (see all.log): no ranks-$N.json"
    note "tune: the gate and nccl-tests run the tuned table (WEFT_SELECTION); tuned rows in ranks-$N.json"
  else
    note "FAIL: tune_$N ended rc=$LAST_RC: the round runs weft's built-in tables"; FAILS=$((FAILS + 1))
  fi
fi

# ---- d. the gate: weft's collectives and graphs on N ranks, every element checked -------------
GATE_COUNTS=${GATE_COUNTS:-0,7,65537,1048579}
if [ -x "$B/bin/weft_gpu_tests" ]; then
  step "gate_collectives_$N" 150 "$B/bin/weft_gpu_tests" collectives --ranks "$N" --counts "$GATE_COUNTS"
  [ "$LAST_RC" = 0 ] || WEFT_ROWS="not run: gate_collectives_$N ended rc=$LAST_RC"
  step "gate_graph_$N" 60 "$B/bin/weft_gpu_tests" graph --ranks "$N"
  [ "$LAST_RC" = 0 ] || [ "$WEFT_ROWS" != ok ] || WEFT_ROWS="not run: gate_graph_$N ended rc=$LAST_RC"
else
  WEFT_ROWS="not run: the bundle has no bin/weft_gpu_tests for the gate"
fi
[ "$WEFT_ROWS" = ok ] || { note "FAIL: weft's nccl-tests rows $WEFT_ROWS"; FAILS=$((FAILS + 1)); }

# ---- e. nccl-tests: weft and the machine's NCCL, plain and in CUDA graphs ----------------------
nt_all() {  # nt_all VARIANT [TESTS]
  local t lib
  for t in ${2:-$NT_TESTS}; do
    for lib in weft nccl; do
      if [ "$lib" = weft ] && [ "$WEFT_ROWS" != ok ]; then note "$(printf '%-28s NOT RUN (weft rows %s)' "nt_weft_${t}_$1" "$WEFT_ROWS")"; continue; fi
      if [ "$lib" = nccl ] && [ -z "$REALNCCL" ]; then note "$(printf '%-28s NOT RUN (no machine NCCL found)' "nt_nccl_${t}_$1")"; continue; fi
      nt_run "$lib" "$1" "$t"
    done
  done
}
nt_wait_build
if [ "$NT_BUILD_RC" = 0 ]; then
  for lib in weft nccl; do
    want=$B/lib/libweft_nccl.so; [ "$lib" = nccl ] && want=$REALNCCL
    [ -n "$want" ] && [ -f "$want" ] || continue
    got=$(nt_resolves "$lib")
    if [ "$got" = "$(readlink -f "$want")" ]; then note "loader: nccl-tests on $lib load $got"
    else
      note "FAIL: loader: nccl-tests on $lib would load $got as libnccl.so.2, not $want"; FAILS=$((FAILS + 1))
      [ "$lib" = weft ] && WEFT_ROWS="not run: the loader picks $got"
      [ "$lib" = nccl ] && REALNCCL=""
    fi
  done
  [ "$PART" != 2 ] && nt_all plain
  [ "$PART" != 1 ] && nt_all graph
  # NT_EXTRA (issue 27): r1 and r2 run the seven tests with registered buffers and symmetric
  # windows; zero runs AllGather and AllToAll under NCCL_CTA_POLICY=2 with windows; eff runs
  # AllReduce under NCCL_CTA_POLICY=1.
  for v in ${NT_EXTRA:-}; do
    case $v in
      r1|r2) nt_all "$v" ;;
      zero) nt_all zero "all_gather alltoall" ;;
      eff) nt_all eff all_reduce ;;
      *) note "NT_EXTRA: unknown variant '$v' (r1, r2, zero, eff)"; FAILS=$((FAILS + 1)) ;;
    esac
  done
elif [ "$NT_BUILD_RC" = none ] && [ -n "$NT_SRC" ]; then
  note "nccl-tests: not run (too little of the budget was left to build them)"; FAILS=$((FAILS + 1))
elif [ -n "$NT_SRC" ]; then
  note "nccl-tests: not run (the build ended rc=$NT_BUILD_RC; see all.log)"; FAILS=$((FAILS + 1))
fi

# ---- f. if time is left: the partitioned round, HM against ring, the PyTorch check --------------
if [ "$PART" != 1 ]; then
  PR=""; for p in "$B/part_round.sh" "$PWD/bench/part_round.sh"; do [ -f "$p" ] && PR=$p && break; done
  if [ -n "$PR" ] && [ -x "$B/bin/part_bench" ]; then
    PRB=$(left); [ "$PRB" -gt 200 ] && PRB=200  # part_round.sh fits its steps into PART_ROUND_BUDGET
    step part_round 200 env PART_ROUND_BUDGET=$((PRB - 10)) bash "$PR" "$B" "$OUT/part.txt"
  else note "part_round: not run (no part_round.sh or bin/part_bench in the bundle)"; fi
  SHAPES="$N"; for g in $(seq $((N - 1)) -1 2); do [ $((N % g)) = 0 ] && SHAPES="$SHAPES $g"; done
  for g in $SHAPES; do
    WBENCH_LIMIT=90 WBENCH_ENV="WEFT_ALGO=hm_allreduce WEFT_GPUS_PER_NODE=$g" \
      wbench "hm_$((N / g))x$g" "$B" new 1 plain AllReduce --sizes 32K:1G --factor 8 --no-nccl
  done
  WBENCH_LIMIT=90 WBENCH_ENV="WEFT_ALGO=ring_allreduce" wbench ring_compiled "$B" new 1 plain AllReduce --sizes 32K:1G --factor 8 --no-nccl
  TC="$B/torch"; [ -f "$TC/torch_check.py" ] || TC="$PWD/tests/gpu/nccl"
  if [ -n "$PY" ] && [ -f "$TC/torch_check.py" ] && [ -f "$B/lib/libweft_nccl.so" ]; then
    WSO=$(readlink -f "$B/lib/libweft_nccl.so")
    step torch_weft 100 env LD_LIBRARY_PATH="$(nt_libdir weft)${ORIG_LD:+:$ORIG_LD}" LD_PRELOAD="$WSO" WEFT_NCCL_EXPECT_LIB="$WSO" \
      PYTHONUNBUFFERED=1 "$PY" "$TC/torch_check.py" "$TMP/torch_weft.json" --expect-weft
    case $LAST_RC in 0|NOTRUN) ;; *) note "FAIL: the PyTorch check on weft exited $LAST_RC"; FAILS=$((FAILS + 1));; esac
    step torch_nccl 100 env PYTHONUNBUFFERED=1 WEFT_NCCL_EXPECT_LIB="$WSO" "$PY" "$TC/torch_check.py" "$TMP/torch_nccl.json" --expect-nccl
    if [ -f "$TMP/torch_weft.json" ] && [ -f "$TMP/torch_nccl.json" ]; then
      step torch_compare 30 "$PY" "$TC/torch_compare.py" "$TMP/torch_weft.json" "$TMP/torch_nccl.json"
      case $LAST_RC in 0|NOTRUN) ;; *) note "FAIL: weft's and NCCL's PyTorch runs differ (torch_compare exited $LAST_RC)"; FAILS=$((FAILS + 1));; esac
    fi
  else
    note "torch: not run (python with torch, torch_check.py or lib/libweft_nccl.so missing)"
  fi
fi

# ---- the tables and the summary, last -----------------------------------------------------
TABLES=""; for p in "$B/round_n_tables.py" "$HERE/../../scripts/round_n_tables.py"; do [ -f "$p" ] && TABLES=$p && break; done
TPY=$(command -v python3 || echo "$PY")
if [ -n "$TABLES" ] && [ -n "$TPY" ]; then
  "$TPY" "$TABLES" "$OUT" --out "$OUT/tables.md" 2>>"$ALL" || note "round_n_tables.py failed (see all.log)"
fi
awk -F, 'NR > 1 && $2 == "new" && $9 != 0 && $9 != -1 && $9 != "" {n++} END {exit n > 0}' "$OUT/bench.csv" ||
  { note "FAIL: the new bundle's weft bench rows with #wrong above 0 (bench.csv)"; FAILS=$((FAILS + 1)); }
note "elapsed: $(elapsed) s of a $BUDGET s budget; $FAILS failures; files: $(cd "$OUT" && ls | tr '\n' ' ')"
[ -f "$OUT/tables.md" ] && { echo; echo "==== tables.md"; cat "$OUT/tables.md"; }
echo; echo "==== summary"; cat "$SUMMARY"
[ "$FAILS" = 0 ]
