#!/usr/bin/env bash
# `ctest -L gpu` from a GPU bundle (scripts/make_gpu_bundle.sh writes ctest_gpu.list with
# scripts/bundle_ctest.py and copies this as run_ctest.sh): each gpu-labelled test of the build
# tree runs with CTest's environment, arguments and skip code (77), under
# min(its CTest timeout, CTEST_CAP_S) and within the round's budget.
# Prints one line per test (PASS / FAIL / SKIP / TIMEOUT, seconds, last line of its output),
# keeps each log under $OUT/ctest/, and ends with the totals; exits 1 if a test failed or timed
# out, 0 otherwise. Tests that the budget left out are listed as "not run" (not passed).
# Usage: BUNDLE/run_ctest.sh BUNDLE [REGEX]   (REGEX: extended regex on test names, default all)
# Environment: OUT (default /tmp/weft-ctest), CTEST_BUDGET_S (default 540: no test starts
#   with less than CTEST_MIN_S, default 30, left), CTEST_CAP_S (default 180), CTEST_EXCLUDE
#   (extended regex of names to leave out).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$(cd "${1:?usage: run_ctest.sh BUNDLE [REGEX]}" && pwd -P)
MATCH=${2:-.}
OUT=${OUT:-/tmp/weft-ctest}
mkdir -p "$OUT/ctest" "$OUT/build" "$OUT/wd/gpu" "$OUT/wd/nccl"
export WEFT_DATA_DIR=$B/share/weft
BUDGET=${CTEST_BUDGET_S:-540} MIN=${CTEST_MIN_S:-30} CAP=${CTEST_CAP_S:-180}
EXCLUDE=${CTEST_EXCLUDE:-}
START=$SECONDS
pass=0 fail=0 skip=0 notrun=0 failed=()

# t NAME TIMEOUT WORKDIR ENV... -- COMMAND ARGS...: one test, as ctest_gpu.list names it.
t() {
  local name=$1 lim=$2 wd=$3 envs=() left rc t0 status last
  shift 3
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [[ $name =~ $MATCH ]] || return 0
  if [ -n "$EXCLUDE" ] && [[ $name =~ $EXCLUDE ]]; then return 0; fi
  left=$(( BUDGET - (SECONDS - START) ))
  if [ "$left" -lt "$MIN" ]; then echo "-- not run (budget): $name"; notrun=$((notrun + 1)); return 0; fi
  [ "$lim" -gt "$CAP" ] && lim=$CAP
  [ "$lim" -gt $((left - 5)) ] && lim=$((left - 5))
  t0=$SECONDS
  (cd "$OUT/wd/$wd" && timeout -k 5 "$lim" env "${envs[@]}" "$@") >"$OUT/ctest/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS; pass=$((pass + 1)) ;;
    77) status=SKIP; skip=$((skip + 1)) ;;
    124|137) status="TIMEOUT(${lim}s)"; fail=$((fail + 1)); failed+=("$name") ;;
    *) status="FAIL(rc=$rc)"; fail=$((fail + 1)); failed+=("$name") ;;
  esac
  last=$(grep -v '^[[:space:]]*$' "$OUT/ctest/$name.log" | tail -n 1 | cut -c1-150)
  printf '%-8s %-36s %4ss  %s\n' "$status" "$name" "$((SECONDS - t0))" "$last"
  case $status in PASS|SKIP) ;; *) tail -n 8 "$OUT/ctest/$name.log" | sed 's/^/    /' ;; esac
}

# shellcheck disable=SC1091  # written by scripts/bundle_ctest.py into the bundle
. "$B/ctest_gpu.list"
echo "ctest (bundle $(sed -n 's/^commit: //p' "$B/BUNDLE_INFO")): $pass passed, $fail failed, $skip skipped, $notrun not run, $((SECONDS - START)) s"
[ "$fail" = 0 ] || echo "failed: ${failed[*]}"
[ "$fail" = 0 ]
