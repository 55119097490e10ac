#!/usr/bin/env bash
# bench/net_round.sh against fakes, without a GPU (label unit): a fake bundle whose bin/weft
# records the environment it was started with and prints weft bench's JSON rows, and a fake
# nvidia-smi. Checks that the NCCL socket variables and WEFT_EMULATE_NODES reach the bench,
# that both size ranges run, that the ratio table holds every row with weft / NCCL computed,
# that a timed-out range is reported, and that the lowest ratio is printed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd -P)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bundle/bin" "$T/path"
cat > "$T/path/nvidia-smi" <<'EOS'
#!/usr/bin/env bash
case "$*" in -L) printf 'GPU 0: Fake\nGPU 1: Fake\n' ;; *) echo "Fake GPU" ;; esac
EOS
cat > "$T/bundle/bin/weft" <<'EOS'
#!/usr/bin/env bash
if [ "$1" = env ]; then echo "network path between nodes: UCX 9.9 (fake)"; exit 0; fi
env | grep -E '^(NCCL_|WEFT_EMULATE_NODES|WEFT_LOG|WEFT_NET_|WEFT_ALGO=)' | sort > "$FAKE_ENV.$$"
echo "$*" >> "$FAKE_ARGS"
echo "vm:1 weft INFO NET rank 0: UCX to rank 1: lane[0]: 1:tcp/lo.0 md[0] -> md[0]/tcp am am_bw#0" >&2
case "$*" in
  *64M:1G*) [ -n "${FAKE_HANG:-}" ] && sleep 100
    echo '{"collective":"AllReduce","bytes":1073741824,"count":268435456,"type":"float32","weft_us":400000.0,"weft_busbw":2.684,"weft_wrong":0,"weft_tbs":16,"nccl_us":380000.0,"nccl_busbw":2.826,"nccl_wrong":0,"nccl_tbs":2,"weft_plan":"ring_allreduce (compiled algo/state, Simple, x8)","sim_us":390000.0,"sim_err_pct":-2.5}' ;;
  *) echo '{"collective":"AllReduce","bytes":1048576,"count":262144,"type":"float32","weft_us":500.0,"weft_busbw":2.097,"weft_wrong":0,"weft_tbs":2,"nccl_us":520.0,"nccl_busbw":2.016,"nccl_wrong":0,"nccl_tbs":2,"weft_plan":"allpairs (hand-built, Simple, x8)","sim_us":null,"sim_err_pct":null}'
     echo '{"collective":"AllGather","bytes":1048576,"count":131072,"type":"float32","weft_us":600.0,"weft_busbw":0.874,"weft_wrong":3,"weft_tbs":2,"nccl_us":300.0,"nccl_busbw":1.748,"nccl_wrong":0,"nccl_tbs":2,"weft_plan":"allpairs_allgather (compiled hpds/state, Simple, x1)","sim_us":700.0,"sim_err_pct":16.7}' ;;
esac
EOS
chmod +x "$T/bundle/bin/weft" "$T/path/nvidia-smi"
export PATH="$T/path:$PATH" FAKE_ENV="$T/env" FAKE_ARGS="$T/args" OUT="$T/out"
export NET_ROUND_ALGOS=""  # the algorithms' columns are checked at the end
fail() { echo "net_round_dryrun: $*"; echo "--- output:"; cat "$T/stdout" 2>/dev/null; exit 1; }
bash "$HERE/bench/net_round.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "the script failed"
for f in "$T"/env.*; do
  for v in NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket WEFT_EMULATE_NODES=2; do
    grep -qx "$v" "$f" || fail "the bench ran without $v"
  done
done
[ "$(grep -c -- '--sizes 1M:16M' "$T/args")" = 1 ] || fail "the small sizes did not run once"
[ "$(grep -c -- '--sizes 64M:1G' "$T/args")" = 1 ] || fail "the large sizes did not run once"
grep -q -- '-t .*bench/net/h200-emulated-2x1.json' "$T/args" || fail "the simulator was not given the network model"
grep -q '| AllReduce | 1 MiB | 2.10 | 2.02 | 1.04 |' "$T/stdout" || fail "the 1 MiB AllReduce row or its ratio is wrong"
grep -q '| AllGather | 1 MiB | 0.87 (3 wrong) | 1.75 | 0.50 |' "$T/stdout" || fail "a row with wrong elements is not marked"
grep -q '| AllReduce | 1 GiB | 2.68 | 2.83 | 0.95 | 400000 | 390000 | -2.5 | 16 | ring_allreduce' "$T/stdout" || fail "the 1 GiB row is wrong"
grep -q 'lowest ratio 0.50' "$T/stdout" || fail "the lowest ratio is not printed"
grep -q 'UCX to rank 1: lane\[0\]' "$T/stdout" || fail "UCX's lanes are not shown"
# A range that hangs is cut at its timeout and said so (shortened here through the fake).
rm -f "$T"/env.* "$T/args"
sed 's/bench large 90 /bench large 3 /' "$HERE/bench/net_round.sh" > "$T/net_round_short.sh"
FAKE_HANG=1 bash "$T/net_round_short.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "the script failed on a timeout"
grep -q 'large (64M:1G) timed out after 3 s' "$T/stdout" || fail "a timed-out range is not reported"
grep -q '| AllReduce | 1 MiB |' "$T/stdout" || fail "the rows before the timeout are lost"
# NET_ROUND_AB=1: weft alone with the network path as it was, a "weft before" column.
rm -f "$T"/env.* "$T/args"
NET_ROUND_AB=1 NET_ROUND_LARGE=64M:256M bash "$HERE/bench/net_round.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "the A/B round failed"
[ "$(grep -c -- '--sizes 64M:256M .*--no-nccl' "$T/args")" = 1 ] || fail "the large range before did not run once, without NCCL"
[ "$(grep -c -- '--sizes 1M:16M .*--no-nccl' "$T/args")" = 1 ] || fail "the small range before did not run once, without NCCL"
[ "$(grep -lx 'WEFT_NET_PROTO=put' "$T"/env.* | wc -l)" = 2 ] || fail "the runs before are not WEFT_NET_PROTO=put"
grep -q '| collective | bytes | weft busbw GB/s | NCCL sockets busbw | ratio | weft before |' "$T/stdout" || fail "no weft before column"
grep -q '| AllReduce | 1 MiB | 2.10 | 2.02 | 1.04 | 2.10 | 500 |' "$T/stdout" || fail "the 1 MiB row lacks its before value"
# NET_ROUND_SWEEP beside it: each variant's runs with its variables, a column each after
# "weft before", named without WEFT_NET_; NET_ROUND_FACTOR sets the small range's factor only.
rm -f "$T"/env.* "$T/args"
NET_ROUND_AB=1 NET_ROUND_FACTOR=16 NET_ROUND_SWEEP="WEFT_NET_LANES=0 WEFT_NET_LANES=8,WEFT_NET_STRIPE_BYTES=65536" \
  bash "$HERE/bench/net_round.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "the sweep round failed"
[ "$(grep -lx 'WEFT_NET_LANES=0' "$T"/env.* | wc -l)" = 2 ] || fail "the LANES=0 runs are not WEFT_NET_LANES=0"
[ "$(grep -lx 'WEFT_NET_STRIPE_BYTES=65536' "$T"/env.* | xargs grep -lx 'WEFT_NET_LANES=8' | wc -l)" = 2 ] ||
  fail "the second variant's runs lack one of its variables"
[ "$(grep -c -- '--sizes 1M:16M --factor 16 ' "$T/args")" = 4 ] || fail "the small ranges did not run with factor 16"
[ "$(grep -c -- '--sizes 64M:1G --factor 4 ' "$T/args")" = 4 ] || fail "the large ranges did not keep factor 4"
grep -q '| ratio | weft before | weft LANES=0 | weft LANES=8,STRIPE_BYTES=65536 | weft us |' "$T/stdout" ||
  fail "no sweep columns after weft before"
grep -q '| AllReduce | 1 MiB | 2.10 | 2.02 | 1.04 | 2.10 | 2.10 | 2.10 | 500 |' "$T/stdout" || fail "the 1 MiB row lacks its sweep values"
# NET_ROUND_ALGOS (default hm ring allpairs): each forced with WEFT_ALGO, weft alone, a column
# each and hm/ring; NET_ROUND_RANKS4=1: the same on 4 ranks with NCCL, a second table.
unset NET_ROUND_ALGOS
rm -rf "$T"/env.* "$T/args" "$T/out"
NET_ROUND_RANKS4=1 bash "$HERE/bench/net_round.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "the algorithms' round failed"
for a in AllReduce:hm_allreduce,AllGather:hm_allgather AllReduce:ring_allreduce,AllGather:ring_allgather \
         AllReduce:allpairs,AllGather:allpairs_allgather; do
  [ "$(grep -lx "WEFT_ALGO=$a" "$T"/env.* | wc -l)" = 2 ] || fail "WEFT_ALGO=$a did not run on 2 and on 4 ranks"
done
[ "$(grep -c -- '--ranks 2 --sizes 1M:256M --factor 16 .*--no-nccl' "$T/args")" = 3 ] || fail "the 3 algorithms did not run on 2 ranks, alone"
[ "$(grep -c -- '--ranks 4 --sizes 1M:256M --factor 16 .*--no-nccl' "$T/args")" = 3 ] || fail "the 3 algorithms did not run on 4 ranks, alone"
[ "$(grep -c -- '--ranks 4 --sizes 1M:256M --factor 16 --warmup 1 --iters 3 --json --no-sim$' "$T/args")" = 1 ] ||
  fail "4 ranks did not run once against NCCL"
[ "$(grep -c '| ratio | weft hm | weft ring | weft allpairs | hm/ring | weft us |' "$T/stdout")" = 2 ] ||
  fail "the 2-rank and the 4-rank tables do not both have the algorithm columns"
grep -q '| AllReduce | 1 MiB | 2.10 | 2.02 | 1.04 | 2.10 | 2.10 | 2.10 | 1.00 | 500 |' "$T/stdout" || fail "the 1 MiB row lacks its algorithms"
grep -q '2 emulated nodes of 2' "$T/stdout" || fail "the 4-rank table is not introduced"
NET_ROUND_ALGOS="hm bogus" bash "$HERE/bench/net_round.sh" "$T/bundle" > "$T/stdout" 2>&1 || fail "an unknown algorithm failed the round"
grep -q "NET_ROUND_ALGOS: unknown 'bogus'" "$T/stdout" || fail "an unknown algorithm is not named"
echo "net_round_dryrun: ok"
