#!/usr/bin/env bash
# `weft tune` on GPUs (label gpu): tunes AllReduce on 2 ranks from 1 KiB to 1 MiB and writes
# a table, then `weft bench` runs with it (WEFT_SELECTION): every result must be right, and at
# each size the runtime must run the winner tune printed (as `weft bench` names it). Exits 77 (skipped) where tune had no
# GPU (it then simulates, and its first line says so).
# Usage: tests/gpu/tune_gpu.sh path/to/weft
set -u
WEFT=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "tune_gpu: FAIL: $*"; echo "--- tune stdout"; cat "$D/tune.out"; echo "--- tune stderr (last 20 lines)"; tail -20 "$D/tune.err"; exit 1; }

"$WEFT" tune AllReduce --sizes 1K:1M --ranks 2 -o "$D/t.json" >"$D/tune.out" 2>"$D/tune.err"
rc=$?
if head -1 "$D/tune.out" | grep -q SIMULATED; then echo "tune_gpu: no GPU in use: skipped"; exit 77; fi
[ "$rc" = 0 ] || fail "weft tune exited with $rc"
grep -q "^# weft tune: measured on " "$D/tune.out" || fail "the output does not say it was measured"
grep -q "candidate 1 of " "$D/tune.err" || fail "no progress on standard error"
grep -q '"note":"weft tune, measured on ' "$D/t.json" || fail "the table's rows do not say they were measured"

WEFT_SELECTION="$D/t.json" "$WEFT" bench AllReduce --sizes 1K:1M --ranks 2 --no-nccl --json >"$D/bench.out" 2>"$D/bench.err"
rc=$?
[ "$rc" = 0 ] || { cat "$D/bench.out" "$D/bench.err"; fail "weft bench with the tuned table exited with $rc"; }
python3 - "$D/tune.out" "$D/bench.out" <<'PY' || fail "the runtime did not run the tuned winners correctly"
import json, re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
winners = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\d+) (B|KiB|MiB|GiB)\s+(.+?)\s{2,}[\d.]+\s{2,}", line)
    if m:
        winners[int(m.group(1)) * units[m.group(2)]] = m.group(3)
rows = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
assert len(rows) == 11, f"{len(rows)} bench rows, expected 11 (1 KiB to 1 MiB)"
bad = 0
for r in rows:
    want = winners.get(r["bytes"])
    # The whole description (algorithm, scheduler, protocol, instances, micro-batch); the
    # one-shot kernel's blocks follow from the size, so by name only.
    ran = r["weft_plan"]
    same = want == ran or (want == "oneshot (kernel)" and ran.startswith("oneshot "))
    ok = r["weft_wrong"] == 0 and same
    bad += not ok
    print(f'{r["bytes"]:>8} B: tuned {want}, ran {r["weft_plan"]}, {r["weft_us"]:.2f} us, {r["weft_wrong"]} wrong{"" if ok else "  <-- FAIL"}')
sys.exit(1 if bad else 0)
PY
# A row's micro-batch reaches the runtime: 16 KiB micro-batches, results still right.
cat >"$D/mb.json" <<'JSON'
{"format": "weft-selection", "version": 1, "rows": [
  {"collectives": ["AllReduce"], "algorithm": "ring_allreduce", "scheduler": "algo", "protocol": "Simple", "instances": 4,
   "microbatch_bytes": 16384}
]}
JSON
WEFT_SELECTION="$D/mb.json" "$WEFT" bench AllReduce --sizes 64K:4M --ranks 2 --no-nccl --json >"$D/mb.out" 2>"$D/mb.err"
rc=$?
[ "$rc" = 0 ] || { cat "$D/mb.out" "$D/mb.err"; fail "weft bench with a microbatch_bytes row exited with $rc"; }
python3 - "$D/mb.out" <<'PY' || fail "the microbatch_bytes row did not run right"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert len(rows) == 7, f"{len(rows)} rows, expected 7 (64 KiB to 4 MiB)"
for r in rows:
    print(f'{r["bytes"]:>8} B: ran {r["weft_plan"]}, {r["weft_us"]:.2f} us, {r["weft_wrong"]} wrong')
    assert r["weft_wrong"] == 0 and "mb 16 KiB" in r["weft_plan"], r
PY
echo "tune_gpu: passed"
