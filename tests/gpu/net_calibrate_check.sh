#!/usr/bin/env bash
# bench/net_calibrate.py without a GPU (label unit): a fake network round whose "measured"
# rows are the simulator's own predictions on a known model (1.5 GB/s, 80 us), the hm variant
# 10% slower; the script must print every row, recover the model's figures, bring every row
# from 16 MiB within 20%, write the calibrated model, and refuse a round without rows.
# Usage: net_calibrate_check.sh WEFT_BINARY
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd -P)
W=${1:?usage: net_calibrate_check.sh WEFT_BINARY}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "net_calibrate_check: $*"; echo "--- output:"; cat "$T/stdout" 2>/dev/null; exit 1; }
for n in 2x1 2x2; do
  python3 -c "import json, sys; m = json.load(open(sys.argv[1])); m.update(nic_bandwidth_GBps=1.5, nic_latency_us=80.0, tb_net_GBps=1.5); json.dump(m, open(sys.argv[2], 'w'))" \
    "$HERE/bench/net/h200-emulated-$n.json" "$T/true$n.json"
done
measured() {  # measured SLOWDOWN FILE RANKS SIZES FACTOR: the true model's predictions as rows
  local slow=$1 f=$2 ranks=$3 sizes=$4 factor=$5 topo=$T/true2x1.json
  [ "$ranks" = 4 ] && topo=$T/true2x2.json
  "$W" bench --predict -t "$topo" --ranks "$ranks" --sizes "$sizes" --factor "$factor" AllReduce AllGather --json |
    python3 -c "
import json, sys
for l in sys.stdin:
    if l.startswith('{'):
        r = json.loads(l); r.update(weft_us=r['sim_us'] * $slow, weft_busbw=r['sim_busbw'] / $slow, weft_wrong=0); print(json.dumps(r))" > "$f"
  [ -s "$f" ] || fail "weft bench --predict gave no rows for $f"
}
O=$T/round
mkdir -p "$O"
measured 1.0 "$O/small.jsonl" 2 1M:16M 16
measured 1.0 "$O/large.jsonl" 2 256M:1G 4
echo hm > "$O/variant_a_hm.name"
WEFT_ALGO=AllReduce:hm_allreduce,AllGather:hm_allgather measured 1.1 "$O/variant_a_hm_all.jsonl" 2 1M:256M 16
measured 1.0 "$O/r4_main.jsonl" 4 16M:256M 16
echo "LANES=4" > "$O/variant_s1.name"
cp "$O/small.jsonl" "$O/variant_s1_small.jsonl"  # a sweep variant: not the model's input, left out
python3 "$HERE/bench/net_calibrate.py" "$O" --weft "$W" --write "$T/cal.json" > "$T/stdout" 2>&1 || fail "the script failed"
[ "$(grep -c '^| 2 | selection |' "$T/stdout")" = 8 ] || fail "not every 2-rank row of the selection is printed"
[ "$(grep -c '^| 2 | hm |' "$T/stdout")" = 6 ] || fail "not every hm row is printed"
[ "$(grep -c '^| 4 | selection |' "$T/stdout")" = 4 ] || fail "not every 4-rank row is printed"
grep -q 'LANES' "$T/stdout" && fail "a sweep variant was compared with the model"
grep -q 'hm_allreduce (compiled .*) / hm_allreduce' "$T/stdout" || fail "the hm rows were not predicted under WEFT_ALGO"
python3 - "$T/stdout" "$T/cal.json" <<'EOF' || fail "the calibration did not recover the model"
import json, re, sys
out = open(sys.argv[1]).read()
m = re.search(r"nic_bandwidth_GBps ([0-9.]+) \(was [0-9.]+\), nic_latency_us ([0-9.]+) \(was [0-9.]+\)", out)
assert m, "no calibrated line"
bw, lat = float(m.group(1)), float(m.group(2))
assert 1.35 <= bw <= 1.65, bw
assert lat == 80, lat
w = re.search(r"within 20%: (\d+) of (\d+) before, (\d+) of (\d+) calibrated", out)
assert w and w.group(3) == w.group(4) and int(w.group(1)) < int(w.group(2)), out[-300:]
cal = json.load(open(sys.argv[2]))
assert abs(cal["nic_bandwidth_GBps"] - bw) < 0.01 and cal["nic_latency_us"] == lat and cal["format"] == "weft-topology"
EOF
mkdir "$T/empty"
if python3 "$HERE/bench/net_calibrate.py" "$T/empty" --weft "$W" > "$T/stdout" 2>&1; then fail "a round without rows passed"; fi
grep -q "no rows in" "$T/stdout" || fail "a round without rows is not said"
echo "net_calibrate_check: ok"
