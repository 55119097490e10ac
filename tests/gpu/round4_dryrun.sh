#!/usr/bin/env bash
# Runs tests/gpu/run_round4.sh on a machine without GPUs, against fakes of nvidia-smi,
# weft_gpu_tests, `weft bench` and nccl-tests (the simulator is the real `weft simulate`),
# then checks what the round leaves in $OUT and renders it with scripts/round_tables.py.
# It checks the script's plumbing, not weft: every number the fakes print is made up.
# One fake bench step hangs after three rows, so the timeout path (rows recovered from the
# printed table) is exercised too.
#
# Usage: tests/gpu/round4_dryrun.sh WEFT_BINARY [KEEP_DIR]
#   WEFT_BINARY  a weft built here (CPU is enough): its `simulate` runs for real
#   KEEP_DIR     copy the round's output there (tests/data/round4-sample was made so)
# Exit 0 when every check passes; each failed check prints one line.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REAL_WEFT=$(cd "$(dirname "${1:?usage: round4_dryrun.sh WEFT_BINARY [KEEP_DIR]}")" && pwd)/$(basename "$1")
KEEP=${2:-}
D=$(mktemp -d /tmp/weft-dryrun-XXXXXX)
trap 'rm -rf "$D"' EXIT
BUN=$D/bundle
mkdir -p "$D/fakebin" "$BUN/bin" "$BUN/lib" "$BUN/share/weft" "$BUN/nccl-carry/lib" "$BUN/nccl-carry/nccl-tests"
cp -r "$ROOT/algorithms" "$ROOT/topologies" "$BUN/share/weft/"
cp "$ROOT/tests/gpu/run_round4.sh" "$ROOT/scripts/round_tables.py" "$BUN/"

cat >"$D/fakebin/nvidia-smi" <<'EOF'
#!/bin/bash
case "$*" in
  -L) for i in 0 1 2 3; do echo "GPU $i: NVIDIA H200 (UUID: GPU-fake-$i)"; done ;;
  *--query-gpu=name,driver*) for i in 0 1 2 3; do echo "NVIDIA H200, 580.159.04, 143771 MiB"; done ;;
  *--query-gpu=name*) for i in 0 1 2 3; do echo "NVIDIA H200"; done ;;
  *--query-gpu=driver*) for i in 0 1 2 3; do echo "580.159.04"; done ;;
  "topo -m") printf '\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\t X \tNV18\tNV18\tNV18\nGPU1\tNV18\t X \tNV18\tNV18\n' ;;
  *) echo "fake nvidia-smi: $*" ;;
esac
EOF
cat >"$BUN/bin/weft_gpu_tests" <<'EOF'
#!/bin/bash
echo "fake weft_gpu_tests $*"
echo "rank 0: 123 cases, 0 failures, 1.0 s"
EOF
# `weft bench` is faked, everything else is the real weft.
cat >"$BUN/bin/weft" <<EOF
#!/bin/bash
if [ "\${1:-}" = bench ]; then shift; exec python3 "$D/fake_bench.py" "\$@"; fi
exec "$REAL_WEFT" "\$@"
EOF
cat >"$D/fake_bench.py" <<'EOF'
import sys, time, os
a = sys.argv[1:]
colls, opts, i = [], {}, 0
while i < len(a):
    if a[i] in ("--sizes", "--factor", "--csv"):
        opts[a[i]] = a[i + 1]; i += 2
    elif a[i].startswith("--"):
        opts[a[i]] = True; i += 1
    else:
        colls.append(a[i]); i += 1
def parse(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)
lo, hi = (parse(x) for x in opts["--sizes"].split(":"))
f = float(opts.get("--factor", 2)); graph = "--graph" in opts; nccl = "--no-nccl" not in opts
algo = os.environ.get("WEFT_ALGO", "") + os.environ.get("WEFT_GPUS_PER_NODE", "")
R = 4
rows = []
n = 0
for c in colls:
    print("#\n# %s  float32 sum  %d ranks  NVIDIA H200  %s  warmup 5, iters 20%s" % (c, R, "NCCL 22803" if nccl else "no NCCL", ", CUDA graph" if graph else ""))
    print("#    size(B)        count     type |   weft(us)    algbw    busbw #wrong  TBs |   nccl(us)    algbw    busbw #wrong  TBs | speedup")
    b = float(lo)
    while b <= hi * 1.0000001:
        size = int(b); b *= f
        count = size // 4 // (1 if c == "AllReduce" else R)
        if count == 0: continue
        n += 1
        if graph and n > 3:  # the dry run's hanging step
            sys.stdout.flush(); time.sleep(600)
        fac = 2.0 * (R - 1) / R if c == "AllReduce" else (R - 1) / R
        wus = 8.0 + size / (250e3 + 10 * len(algo) * 1e3) - (2.0 if graph else 0)
        nus = 9.0 + size / 300e3
        wa, na = size / wus / 1e3, size / nus / 1e3
        wt = 4 if size <= 131072 else 48
        side_n = "%10.2f %8.2f %8.2f %6d %4d" % (nus, na, na * fac, 0, 24) if nccl else "  ----------        -        -      -    -"
        sp = "%7.2f" % (nus / wus) if nccl else "      -"
        print(" %11d %12d %8s | %10.2f %8.2f %8.2f %6d %4d | %s | %s" % (size, count, "float32", wus, wa, wa * fac, 0, wt, side_n, sp))
        sys.stdout.flush()
        rows.append((c, size, count, wus, wa, wa * fac, wt, nus if nccl else 0, na if nccl else 0, na * fac if nccl else 0, 0 if nccl else -1, 24 if nccl else 0))
if "--csv" in opts:
    with open(opts["--csv"], "w") as out:
        out.write("collective,bytes,count,type,weft_us,weft_algbw,weft_busbw,weft_wrong,weft_tbs,nccl_us,nccl_algbw,nccl_busbw,nccl_wrong,nccl_tbs\n")
        for c, size, count, wus, wa, wb, wt, nus, na, nb, nw, nt in rows:
            out.write("%s,%d,%d,float32,%g,%g,%g,0,%d,%g,%g,%g,%d,%d\n" % (c, size, count, wus, wa, wb, wt, nus, na, nb, nw, nt))
EOF
: >"$BUN/nccl-carry/lib/libweft_nccl.so"
for t in all_reduce all_gather reduce_scatter alltoall; do
  cat >"$BUN/nccl-carry/nccl-tests/${t}_perf" <<'EOF'
#!/bin/bash
echo "# nccl-tests version 2.17.6 nccl-headers=22800 nccl-library=22800"
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
s=8
while [ $s -le 268435456 ]; do
  printf "%12d %13d %9s %7s %7s %8.2f %7.2f %7.2f %6d %8.2f %7.2f %7.2f %6d\n" $s $((s / 4)) float sum -1 12.5 1.00 1.50 0 12.0 1.10 1.60 0
  s=$((s * 8))
done
echo "# Avg bus bandwidth    : 1.55"
EOF
  chmod +x "$BUN/nccl-carry/nccl-tests/${t}_perf"
done
chmod +x "$D/fakebin/nvidia-smi" "$BUN/bin/weft" "$BUN/bin/weft_gpu_tests"

# The fake nvidia-smi first on PATH; the fake carry has no MPI builds, so no mpirun step runs.
# The fake steps take seconds; the simulator (110 runs) may take longer on a loaded machine.
OUT=$D/out ROUND_BUDGET_S=200 ROUND_STEP_CAP_S=6 ROUND_SIM_WAIT_S=240 PATH="$D/fakebin:$PATH" \
  bash "$BUN/run_round4.sh" "$BUN" >"$D/stdout.txt" 2>&1
rc=$?

fails=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if ! "$@" >/dev/null 2>&1; then echo "FAIL: $what"; fails=$((fails + 1)); fi
}
O=$D/out
check "the round exits 0 (it exited $rc; output in stdout.txt)" test "$rc" = 0
check "at most 8 files in \$OUT (the device tool's limit)" test "$(find "$O" -type f | wc -l)" -le 8
for f in summary.txt all.log machine.log bench.csv sim.jsonl nccltests.log tables.md; do check "$f is written" test -s "$O/$f"; done
# bench: 4 collectives x 10 sizes less 8 B of the three whose count per rank is then 0; graph:
# 3 rows before its hang; HM 1x4, 2x2 and ring: 2 x 6 each.
check "bench.csv holds 37 + 3 + 36 rows (got $(($(wc -l <"$O/bench.csv") - 1)))" test "$(($(wc -l <"$O/bench.csv") - 1))" = 76
check "the hung graph step's rows come from its table" grep -q "^bench_graph,AllReduce,64," "$O/bench.csv"
check "the hung graph step is reported as a timeout" grep -q "^bench_graph .*timeout 6s" "$O/summary.txt"
check "both HM shapes of 4 GPUs ran" grep -q "^hm_2x2,AllGather,1073741824," "$O/bench.csv"
# sim: (7 default algorithms + 2 HM x 2 shapes) x 10 sizes.
check "sim.jsonl holds 110 rows (got $(wc -l <"$O/sim.jsonl"))" test "$(wc -l <"$O/sim.jsonl")" = 110
check "the simulator predicted HM 2x2 at 1 GiB" grep -q '"tag":"hm_allreduce@2x2","gpus_per_node":2,"instances":[0-9]*,"algorithm"' "$O/sim.jsonl"
# At 24 per link HM 1x4 needs 144 blocks per rank: as the runtime does, the round simulates
# it with derived instances within 72 (instances 0 in its row).
check "the simulator applied the runtime's 72-block rule to HM 1x4" \
  grep -q '"tag":"hm_allreduce@1x4","gpus_per_node":4,"instances":0,.*"bytes":1073741824' "$O/sim.jsonl"
check "nccl-tests ran for the four collectives" test "$(grep -c '^######## weft t4' "$O/nccltests.log")" = 4
check "the summary is printed last" sh -c "tail -n 1 '$D/stdout.txt' | grep -q '^elapsed:'"
check "the tables have every section" sh -c "grep -c '^### ' '$O/tables.md' | grep -qx 8"
check "the HM table has a 2x2 column" grep -q "HM 2x2 busbw" "$O/tables.md"
if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp "$O"/* "$KEEP"/; fi
if [ "$fails" != 0 ]; then
  echo "---- round output:"; tail -n 40 "$D/stdout.txt"
  exit 1
fi
echo "round4 dry run: all checks passed ($(grep -c . "$O/summary.txt") summary lines, $(wc -l <"$O/bench.csv") bench rows, $(wc -l <"$O/sim.jsonl") simulations)"
