#!/usr/bin/env bash
# Runs tests/gpu/run_round_n.sh on a machine without GPUs, against the fakes of
# tests/gpu/round_n_fakes.sh (nvidia-smi, mpirun, mpicc, nvcc, make, nccl-tests, weft bench,
# weft_gpu_tests, the part round, the PyTorch check; the two NCCL libraries are real shared
# libraries, so the loader checks run for real), and checks the round's flow, timeouts,
# budget guard and tables. Every number is made up: it checks the script, not weft.
#   1. 4 GPUs, a base bundle, every part: 28 nccl-tests runs, one of them hanging into its
#      timeout, one hanging bench step whose rows come from its printed table;
#   2. 2 GPUs, --part 1, the gate fails: no weft nccl-tests row runs, NCCL's plain rows do,
#      and the nccl-tests build of scenario 1 is reused;
#   3. 4 GPUs, --part 2, weft's library answers NCCL's version: the first weft row fails and
#      no other weft row runs;
#   4. a budget spent at once: every step says NOT RUN and the round still writes its files.
#   5. 2 GPUs, --part 1, NT_EXTRA="r2 zero eff": the windows and CTA-policy rows and their tables.
#   6. 2 GPUs, --part 1, ROUND_TUNE: `weft tune` first, the gate runs its table, ranks-2.json.
# Usage: tests/gpu/round_n_dryrun.sh [KEEP_DIR]   (KEEP_DIR: scenario 1's $OUT is copied there)
# Needs bash, python3 and a C compiler (cc, gcc or clang); exits 77 (skipped) without one. Exit 0 when every check passes;
# each failed check prints one line.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KEEP=${1:-}
CC=""; for c in cc gcc clang; do command -v "$c" >/dev/null 2>&1 && CC=$c && break; done
[ -n "$CC" ] || { echo "round_n_dryrun: no C compiler (cc, gcc, clang): skipped"; exit 77; }
export CC
D=$(mktemp -d /tmp/weft-roundn-dry-XXXXXX)
trap 'rm -rf "$D"' EXIT
# shellcheck source=tests/gpu/round_n_fakes.sh
. "$ROOT/tests/gpu/round_n_fakes.sh"
make_fakes "$D" "$ROOT" || { echo "FAIL: could not build the fakes"; exit 1; }

fails=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if ! "$@" >/dev/null 2>&1; then echo "FAIL: $what"; fails=$((fails + 1)); fi
}
# round NAME ARGS...: runs the round from $D (no checkout there) with the fakes first on PATH.
round() {
  local name=$1; shift
  (cd "$D" && env OUT="$D/$name" PATH="$D/fakebin:$PATH" NCCL_LIB="$D/nccl/lib/libnccl.so.2" PY=python3 \
     NT_BUILD_DIR="$D/ntbuild" ROUND_STEP_CAP_S=5 "$@" >"$D/$name.stdout" 2>&1)
}
count() { grep -c "$1" "$2" 2>/dev/null || true; }

# ---- 1. four GPUs, base and new, everything ---------------------------------------------------
t0=$(date +%s)
round r1 FAKE_NGPU=4 FAKE_NT_HANG=alltoall ROUND_BUDGET_S=200 bash "$D/bundle/run_round_n.sh" "$D/bundle" "$D/base"
rc=$?
O=$D/r1
check "1: the round exits 1 (the hung weft run is a failure; it exited $rc)" test "$rc" = 1
check "1: at most 8 files, none in a subfolder" test "$(find "$O" -type f | wc -l)" -le 8 -a "$(find "$O" -mindepth 2 | wc -l)" = 0
for f in summary.txt all.log machine.log bench.csv nccltests.log tables.md part.txt; do check "1: $f is written" test -s "$O/$f"; done
check "1: the machine's NCCL is found with its version" grep -q "^NCCL: $D/nccl/lib/libnccl.so.2.28.9 (2.28.9)" "$O/summary.txt"
check "1: nccl-tests were built with MPI" grep -q "^nt_build .*rc=0 .*all_reduce_perf_mpi" "$O/summary.txt"
check "1: the loader check names weft's library" grep -q "^loader: nccl-tests on weft load $D/bundle/lib/libweft_nccl.so" "$O/summary.txt"
check "1: 28 nccl-tests runs (got $(count '^######## [a-z]* mpi4 ' "$O/nccltests.log"))" test "$(count '^######## [a-z]* mpi4 ' "$O/nccltests.log")" = 28
check "1: every weft run answered 22800" test "$(count 'nccl-library=22800' "$O/nccltests.log")" = 14
check "1: the hung weft alltoall graph run is cut by its timeout" grep -q "^nt_weft_alltoall_graph .*timeout 5s" "$O/summary.txt"
check "1: the weft runs after the hung one still ran" grep -q "^######## weft mpi4 sendrecv graph" "$O/nccltests.log"
check "1: 8 small bench steps, base and new interleaved" \
  test "$(grep -o '^small_[a-z]*_[a-z]*[12]' "$O/summary.txt" | tr '\n' ' ')" = \
  "small_plain_base1 small_plain_new1 small_plain_base2 small_plain_new2 small_graph_base1 small_graph_new1 small_graph_base2 small_graph_new2 "
check "1: bench.csv: 8 x 14 small rows, 2 x 6 HM rows, 2 ring rows (got $(($(wc -l <"$O/bench.csv") - 1)))" test "$(($(wc -l <"$O/bench.csv") - 1))" = 126
check "1: the hung ring step's rows come from its printed table" grep -q "^ring_compiled,new,1,plain,AllReduce,262144," "$O/bench.csv"
check "1: the gate ran on 4 ranks" grep -q "^gate_collectives_4 .*rc=0" "$O/summary.txt"
check "1: the part round and the PyTorch check ran" sh -c "grep -q '^part_round .*rc=0' '$O/summary.txt' && grep -q '^torch_compare .*rc=0' '$O/summary.txt'"
check "1: all_reduce at 8 B: NCCL 8.00 us / weft 4.00 us = 2.00, the same in graphs" grep -q '^| 8 B | 8.00 | 4.00 | 2.00 | 4.00 | 2.00 | 2.00 |' "$O/tables.md"
check "1: the steps table keeps a timed-out step" grep -q '^| nt_weft_alltoall_graph | 124(timeout 5s) |' "$O/tables.md"
check "1: the overview has the 7 collectives" grep -q '^| size | all_reduce | all_gather | reduce_scatter | alltoall | broadcast | reduce | sendrecv |' "$O/tables.md"
check "1: the small table compares base with new (8 B: 3.30 vs 3.00 us, 1.10)" grep -q '^| 8 B | 3.30 / 3.30 | 3.00 / 3.00 | 1.10 |' "$O/tables.md"
check "1: the HM table has 1x4 and 2x2" grep -q '^| size | HM 1x4 | TBs | HM 2x2 | TBs | ring (compiled) | TBs |' "$O/tables.md"
check "1: the tables and then the summary are printed last" sh -c "tail -n 1 '$D/r1.stdout' | grep -q '^elapsed:' && grep -q '^==== tables.md' '$D/r1.stdout'"
check "1: the round took under 120 s with fakes ($(( $(date +%s) - t0 )) s)" test $(( $(date +%s) - t0 )) -lt 120
[ -n "$KEEP" ] && mkdir -p "$KEEP" && cp "$O"/* "$KEEP"/

# ---- 2. two GPUs, --part 1, the gate fails ------------------------------------------------------
round r2 FAKE_NGPU=2 FAKE_GATE_FAIL=1 ROUND_BUDGET_S=200 bash "$D/bundle/run_round_n.sh" "$D/bundle" --part 1
rc=$?; O=$D/r2
check "2: the round exits 1 (it exited $rc)" test "$rc" = 1
check "2: the gate failure is reported" grep -q "^FAIL: weft's nccl-tests rows not run: gate_collectives_2 ended rc=1" "$O/summary.txt"
check "2: no weft nccl-tests row ran" test "$(count '^######## weft' "$O/nccltests.log")" = 0
check "2: NCCL's 7 plain rows ran, no graph row" sh -c "test \$(grep -c '^######## nccl mpi2 .* plain' '$O/nccltests.log') = 7 && ! grep -q ' graph:' '$O/nccltests.log'"
check "2: the build of scenario 1 is reused" grep -q "^nt_build .*reusing" "$O/summary.txt"
check "2: no base: the small table has no base column" sh -c "grep -q '^| size | new us (runs) | NCCL us (median)' '$O/tables.md'"
check "2: part 1 runs no part round" sh -c "! grep -q '^part_round' '$O/summary.txt'"

# ---- 3. four GPUs, --part 2, weft's library answers as NCCL -------------------------------------
round r3 FAKE_NGPU=4 FAKE_WEFT_ANSWER=22809 ROUND_BUDGET_S=200 bash "$D/bundle/run_round_n.sh" "$D/bundle" --part 2
rc=$?; O=$D/r3
check "3: the round exits 1 (it exited $rc)" test "$rc" = 1
check "3: the wrong library is named" grep -q "^FAIL: stopped: nt_weft_all_reduce_graph was answered by nccl-library=22809" "$O/summary.txt"
check "3: one weft row ran, the others did not" sh -c "test \$(grep -c '^######## weft' '$O/nccltests.log') = 1 && test \$(grep -c '^nt_weft_.*NOT RUN (weft rows stopped' '$O/summary.txt') = 6"
check "3: part 2 runs no small bench and no plain nccl-tests row" sh -c "! grep -q '^small_' '$O/summary.txt' && ! grep -q ' plain:' '$O/nccltests.log'"

# ---- 5. two GPUs, --part 1, the windows and CTA-policy variants (NT_EXTRA) ---------------------
round r5 FAKE_NGPU=2 NT_EXTRA="r2 zero eff" ROUND_BUDGET_S=200 SKIP_STEPS="small_plain_new1 small_plain_new2 small_graph_new1 small_graph_new2" \
  bash "$D/bundle/run_round_n.sh" "$D/bundle" --part 1
O=$D/r5
check "5: 7 + 2 + 1 runs of each library beside the 7 plain ones" test "$(count '^######## weft mpi2 ' "$O/nccltests.log")" = 17
check "5: r2 runs with -R 2" grep -q '^######## weft mpi2 reduce_scatter r2: .* -R 2' "$O/nccltests.log"
check "5: zero runs AllGather under NCCL_CTA_POLICY=2 with windows" grep -q '^######## nccl mpi2 all_gather zero: .*NCCL_CTA_POLICY=2 .*-x NCCL_CTA_POLICY=2 .*-b 16M .*-R 2' "$O/nccltests.log"
check "5: eff runs AllReduce alone under NCCL_CTA_POLICY=1" sh -c "grep -q '^######## weft mpi2 all_reduce eff: .*NCCL_CTA_POLICY=1' '$O/nccltests.log' && ! grep -q '^######## weft mpi2 all_gather eff' '$O/nccltests.log'"
check "5: the tables have the windows and policy sections" sh -c "grep -q '^### nccl-tests, symmetric windows (-R 2): busbw' '$O/tables.md' && grep -q '^### nccl-tests, NCCL_CTA_POLICY=2 with symmetric windows' '$O/tables.md'"
check "5: an alltoall row under zero: 16 MiB, busbw both ways" grep -q '^| alltoall | 16 MiB | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | 0 |' "$O/tables.md"

# ---- 4. the budget is spent at once (a minimum left above the budget: no step starts, whatever the clock) ----
t0=$(date +%s)
round r4 FAKE_NGPU=2 ROUND_BUDGET_S=20 ROUND_MIN_LEFT_S=21 bash "$D/bundle/run_round_n.sh" "$D/bundle" "$D/base"
O=$D/r4
check "4: steps say NOT RUN" test "$(count 'NOT RUN (round budget of 20 s spent)' "$O/summary.txt")" -ge 8
check "4: the round ends at once ($(( $(date +%s) - t0 )) s)" test $(( $(date +%s) - t0 )) -lt 15
check "4: the summary and the tables are still written" sh -c "test -s '$O/tables.md' && grep -q '^elapsed:' '$O/summary.txt'"

# ---- 6. two GPUs, --part 1, ROUND_TUNE: tune first, the gate on its table, ranks-2.json --------
round r6 FAKE_NGPU=2 ROUND_TUNE=8:128M ROUND_BUDGET_S=200 bash "$D/bundle/run_round_n.sh" "$D/bundle" --part 1
O=$D/r6
check "6: the tune step ran on 2 ranks" grep -q "^tune_2 .*rc=0" "$O/summary.txt"
check "6: the gate ran the tuned table" grep -q "fake weft_gpu_tests collectives .*selection: .*tuned-2.json" "$O/all.log"
check "6: ranks-2.json holds the tuned row alone and loads as JSON" python3 -c "
import json, sys
t = json.load(open('$O/ranks-2.json'))
sys.exit(0 if len(t['rows']) == 1 and t['rows'][0]['ranks'] == [2, 2] and 'Tuned rows only' in t['description'] else 1)"
check "6: at most 8 files" test "$(find "$O" -type f | wc -l)" -le 8

if [ "$fails" != 0 ]; then
  for s in r1 r2 r3 r4 r5 r6; do echo "---- $s (last 25 lines):"; tail -n 25 "$D/$s.stdout"; done
  exit 1
fi
echo "round_n dry run: all checks passed (6 scenarios)"
