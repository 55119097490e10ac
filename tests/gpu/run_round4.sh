#!/usr/bin/env bash
# One round of weft on every GPU of a one-host machine (issue 9: nvidia-h200-x4; also runs on
# 8 GPUs), from a bundle made by scripts/make_gpu_bundle.sh, in one device call:
#   machine facts; the GPU tests on N ranks (and 3); `weft bench` against NCCL for AllReduce,
#   AllGather, ReduceScatter and AllToAll, 8 B to 1 GiB, with and without CUDA graphs; HM
#   AllReduce and AllGather compiled for one node of N GPUs and for logical nodes of fewer
#   GPUs (WEFT_GPUS_PER_NODE), against the compiled rings; `weft simulate` of each at the same
#   sizes and thread blocks; nccl-tests on weft's NCCL-compatible library when the bundle
#   holds nccl-carry/. See docs/results-h200x4.md.
#
# The lead's commands (from the checkout that `run` sends):
#   scripts/make_gpu_bundle.sh gpu-bundle          # Release sm_90 build, stripped, < 64 MiB
#   run kind=nvidia-h200-x4 timeout_s=600 carry=["gpu-bundle"]
#       command="bash gpu-bundle/run_round4.sh gpu-bundle"
#   then, here:  python3 scripts/round_tables.py /work/.device/<N> > /tmp/tables.md
#   and paste /tmp/tables.md into docs/results-h200x4.md where it says so.
#
# Usage: run_round4.sh BUNDLE   (BUNDLE holds bin/, lib/, share/weft/, optional nccl-carry/)
# Environment: OUT (default /tmp/weft-round4), ROUND_BUDGET_S (default 520: no step starts
# after it, and every step's timeout is cut to what is left), SKIP_STEPS (names to skip),
# ROUND_STEP_CAP_S (a cap on every step's timeout; tests/gpu/round4_dryrun.sh uses it),
# ROUND_SIM_WAIT_S (how long the round waits for the simulator after the last step, 20).
# Writes at most 8 files under $OUT (what the device tool brings back): summary.txt, all.log,
# machine.log, bench.csv, sim.jsonl, nccltests.log, tables.md. The summary is printed last.
#
# shellcheck disable=SC2086,SC1003,SC2012  # word splitting of $COLLS and $SHAPES is meant
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
BUDGET=${ROUND_BUDGET_S:-520}
B=$(cd "${1:?usage: run_round4.sh BUNDLE}" && pwd) || exit 2
OUT=${OUT:-/tmp/weft-round4}
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/weft-round4-XXXXXX)
SUMMARY=$OUT/summary.txt
ALL=$OUT/all.log
: >"$SUMMARY"; : >"$ALL"; : >"$OUT/sim.jsonl"
W=$B/bin/weft
T=$B/bin/weft_gpu_tests
# In case the copy lost the execute bits (the device tool copies files, not archives).
chmod +x "$B"/bin/* "$B"/nccl-carry/nccl-tests/*_perf* 2>/dev/null
export WEFT_DATA_DIR=$B/share/weft
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export WEFT_TIMEOUT=${WEFT_TIMEOUT:-20}   # a stuck kernel ends its step in 20 s, not 60
export WEFT_BOOTSTRAP_TIMEOUT=${WEFT_BOOTSTRAP_TIMEOUT:-30}

note() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - START )); }

# step NAME TIMEOUT CMD...: runs CMD with the timeout cut to the budget left, appends its
# output to all.log, and notes rc, seconds and its last line in the summary.
step() {
  local name=$1 t=$2; shift 2
  case " ${SKIP_STEPS:-} " in *" $name "*) note "$(printf '%-26s skipped (SKIP_STEPS)' "$name")"; return;; esac
  local left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 15 ]; then note "$(printf '%-26s NOT RUN (round budget of %s s spent)' "$name" "$BUDGET")"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  [ -n "${ROUND_STEP_CAP_S:-}" ] && [ "$t" -gt "$ROUND_STEP_CAP_S" ] && t=$ROUND_STEP_CAP_S
  local log=$TMP/$name.log t0 rc dt
  t0=$(date +%s.%N)
  timeout -k 5 "$t" "$@" >"$log" 2>&1
  rc=$?
  dt=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && rc="$rc(timeout ${t}s)"
  note "$(printf '%-26s rc=%-3s %6ss  %s' "$name" "$rc" "$dt" "$(grep -v '^ *$' "$log" | tail -n 1 | cut -c1-150)")"
  { echo "==== $name (rc=$rc, ${dt}s, limit ${t}s): $*"; cat "$log"; } >>"$ALL"
}

# ---- machine facts -------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  cores: $(nproc)"
  timeout 20 nvidia-smi -L
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  timeout 20 nvidia-smi topo -m
  timeout 20 nvidia-smi nvlink -s 2>/dev/null | head -n 40
  ldconfig -p | grep -i 'libnccl'
  for f in $(ldconfig -p | awk '/libnccl\.so\.2 /{print $NF}'); do echo "$f -> $(readlink -f "$f")"; done
  timeout 30 python3 -c 'import torch; print("torch", torch.__version__, "sees", torch.cuda.device_count(), "GPUs; its NCCL", torch.cuda.nccl.version())' 2>&1 | tail -n 1
  echo "bundle: $B"; ls -la "$B" "$B/bin" "$B/lib"; cat "$B/BUNDLE_INFO" 2>/dev/null
} >"$OUT/machine.log" 2>&1
NGPU=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
NCCLSO=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
note "machine: $NGPU x $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1); NCCL: ${NCCLSO:-none} ($(readlink -f "${NCCLSO:-/none}" 2>/dev/null | sed 's/.*libnccl.so.//'))"
note "links: $(nvidia-smi topo -m 2>/dev/null | awk '/^GPU0/{for (i = 2; i <= NF; ++i) if ($i ~ /^NV/) printf "%s ", $i; exit}')(GPU0 to its peers)"
if [ ! -x "$W" ] || [ ! -x "$T" ]; then
  note "the bundle lacks bin/weft or bin/weft_gpu_tests: make it with scripts/make_gpu_bundle.sh"; exit 2
fi
if [ "$NGPU" -lt 3 ]; then
  note "this round wants 3 or more GPUs (found $NGPU): use tests/gpu/run_round.sh on 2"; exit 77
fi
N=$NGPU
# Node shapes of the hierarchical algorithms: one node of N, then logical nodes of every
# proper divisor G >= 2 of N (4: 1x4, 2x2; 8: 1x8, 2x4, 4x2). No inter-node transport exists:
# every shape runs over NVLink; only the algorithm's hierarchy changes.
SHAPES="$N"
for g in $(seq $((N - 1)) -1 2); do [ $((N % g)) = 0 ] && SHAPES="$SHAPES $g"; done
shape_name() { echo "$((N / $1))x$1"; }

# ---- the simulator, on the CPU, beside the GPU steps ----------------------------------
# Each algorithm at each bench size with the thread blocks and micro-batch the runtime uses
# there (selection.cpp: LL up to 128 KiB, one instance per 8 KiB, 1 to 16; Simple above, one
# per 32 KiB, 4 to 24).
TOPO=$B/share/weft/topologies/h200-1x$N.json
[ -f "$TOPO" ] || TOPO=h200-1x$N
simulate_all() {
  local spec algo g tag s inst mb line tbs oop
  for spec in ring_allreduce@$N ring_allgather@$N ring_reducescatter@$N alltoall_direct@$N allpairs_allreduce@$N \
              allpairs_allgather@$N allpairs_reducescatter@$N \
              $(for g in $SHAPES; do echo hm_allreduce@$g hm_allgather@$g; done); do
    algo=${spec%@*}; g=${spec#*@}; tag="$algo@$(shape_name "$g")"
    # AllToAll calls are out of place (as the bench's); in place it would stage through scratch.
    oop=; [ "$algo" = alltoall_direct ] && oop=--out-of-place
    for s in 8 64 512 4096 32768 262144 2097152 16777216 134217728 1073741824; do
      # LL: 32 KiB of data per staging slot, which --microbatch runtime (Simple's 512 KiB
      # slots) does not know, so its micro-batch is given as instances x 32 KiB.
      if [ "$s" -le 131072 ]; then inst=$(( s / 8192 )); [ $inst -lt 1 ] && inst=1; [ $inst -gt 16 ] && inst=16; mb=$(( inst * 32768 ))
      else inst=$(( s / 32768 )); [ $inst -lt 4 ] && inst=4; [ $inst -gt 24 ] && inst=24; mb=runtime; fi
      line=$(timeout 30 "$W" simulate "$algo" --topology "$TOPO" --param "nRanks=$N,GPUPerNode=$g" --size "$s" \
               --instances "$inst" --microbatch "$mb" $oop --json 2>&1 | tail -n 1)
      # The runtime's rule for compiled plans (compile_for_runtime): more than 72 thread
      # blocks per rank at the table's count -> derived instances within 72.
      tbs=$(echo "$line" | sed -n 's/.*"tbs_per_rank_max": *\([0-9]*\).*/\1/p')
      if [ -n "$tbs" ] && [ "$tbs" -gt 72 ]; then
        inst=0
        line=$(timeout 30 "$W" simulate "$algo" --topology "$TOPO" --param "nRanks=$N,GPUPerNode=$g" --size "$s" \
                 --max-tbs 72 --microbatch "$mb" $oop --json 2>&1 | tail -n 1)
      fi
      case $line in
        "{"*) echo "{\"tag\":\"$tag\",\"gpus_per_node\":$g,\"instances\":$inst,${line#\{}" ;;
        *) echo "{\"tag\":\"$tag\",\"gpus_per_node\":$g,\"instances\":$inst,\"bytes\":$s,\"error\":\"$(echo "$line" | tr -d '"\\' | cut -c1-200)\"}" ;;
      esac
    done
  done
}
simulate_all >"$OUT/sim.jsonl" 2>"$TMP/sim.err" &
SIMPID=$!

# ---- the GPU tests ---------------------------------------------------------------------
# The counts of the 2-GPU default less 64 Mi: 16385, 65537 and 131073 sit around the one-shot
# kernel's limit for the element sizes.
COUNTS=0,1,7,1024,16385,65537,131073,1048579
step never_joins 60 "$T" never_joins
step peer_stops 60 "$T" peer_stops
step peer_stops_oneshot 60 "$T" peer_stops --counts 1024
step "collectives_$N" 180 "$T" collectives --ranks "$N" --counts $COUNTS
step "p2p_$N" 60 "$T" p2p --ranks "$N"
step "graph_$N" 60 "$T" graph --ranks "$N"
step initall 60 "$T" initall

# ---- weft bench against NCCL (same run, same buffers) ------------------------------------
COLLS="AllReduce AllGather ReduceScatter AllToAll"
bench() {  # bench NAME TIMEOUT CMD...: a `weft bench` step whose rows also land in $TMP/NAME.csv
  local name=$1 t=$2; shift 2
  step "$name" "$t" "$@" --csv "$TMP/$name.csv"
}
bench bench 170 "$W" bench $COLLS --sizes 8:1G --factor 8
note "NCCL as weft bench loaded it: $(grep -m 1 -o 'NCCL [0-9]*\|libnccl.so.2 not found' "$TMP/bench.log" 2>/dev/null)"
bench bench_graph 150 "$W" bench $COLLS --sizes 8:1G --factor 8 --graph

# ---- HM against ring, compiled for each node shape (weft only: NCCL's rows are above) -----
for g in $SHAPES; do
  bench "hm_$(shape_name "$g")" 90 env WEFT_ALGO=hm_allreduce,hm_allgather WEFT_GPUS_PER_NODE="$g" \
    "$W" bench AllReduce AllGather --sizes 32K:1G --factor 8 --no-nccl
done
bench ring_compiled 90 env WEFT_ALGO=ring_allreduce,ring_allgather "$W" bench AllReduce AllGather --sizes 32K:1G --factor 8 --no-nccl

# ---- nccl-tests on weft's NCCL-compatible library -----------------------------------------
CARRY=""
for c in "$B/nccl-carry" "$PWD/nccl-carry"; do [ -f "$c/lib/libweft_nccl.so" ] && CARRY=$c && break; done
: >"$OUT/nccltests.log"
if [ -n "$CARRY" ]; then
  mkdir -p "$TMP/weftnccl"
  ln -sf "$CARRY/lib/libweft_nccl.so" "$TMP/weftnccl/libnccl.so.2"
  NTLD="$TMP/weftnccl:$CARRY/nccl-tests:$CARRY/nccl-tests/verifiable:$LD_LIBRARY_PATH"
  for t in all_reduce all_gather reduce_scatter alltoall; do
    step "nccltests_${t}_t$N" 60 env LD_LIBRARY_PATH="$NTLD" "$CARRY/nccl-tests/${t}_perf" -b 8 -e 256M -f 8 -g 1 -t "$N" -c 1
    { echo "######## weft t$N $t"; cat "$TMP/nccltests_${t}_t$N.log" 2>/dev/null; } >>"$OUT/nccltests.log"
  done
  # Where tests/gpu/nccl/run_nccl_round.sh looks for Open MPI (the nccl-tests builds are _ompi).
  MPIRUN=""
  for m in mpirun /usr/local/mpi/bin/mpirun /opt/hpcx/ompi/bin/mpirun /usr/lib64/openmpi/bin/mpirun /opt/openmpi/bin/mpirun; do
    p=$(command -v "$m" 2>/dev/null || true); [ -n "$p" ] && MPIRUN=$p && break
  done
  if [ -n "$MPIRUN" ] && timeout 10 "$MPIRUN" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    MPIBASE=$(cd "$(dirname "$(readlink -f "$MPIRUN")")/.." && pwd)
    NTLD="$NTLD:$MPIBASE/lib:$MPIBASE/lib64"
    for t in all_reduce all_gather reduce_scatter alltoall; do
      [ -x "$CARRY/nccl-tests/${t}_perf_ompi" ] || continue
      step "nccltests_${t}_mpi$N" 60 env LD_LIBRARY_PATH="$NTLD" "$MPIRUN" -np "$N" --allow-run-as-root --bind-to none \
        --mca btl self,tcp --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST \
        -x NVSHMEM_DISABLE_NVLS -x WEFT_TIMEOUT -x WEFT_DATA_DIR "$CARRY/nccl-tests/${t}_perf_ompi" -b 8 -e 256M -f 8 -g 1 -t 1 -c 1
      { echo "######## weft mpi$N $t"; cat "$TMP/nccltests_${t}_mpi$N.log" 2>/dev/null; } >>"$OUT/nccltests.log"
    done
  else
    note "nccl-tests with mpirun: no Open MPI mpirun on this machine, not run"
  fi
else
  note "nccl-tests: no nccl-carry/ in the bundle or the checkout, not run"
fi

# ---- what is left if time allows: 3 ranks, the compiled HM plans through the test matrix --
step collectives_3 90 "$T" collectives --ranks 3 --counts $COUNTS
for g in $SHAPES; do
  step "hm_tests_$(shape_name "$g")" 90 env WEFT_ALGO=hm_allreduce,hm_allgather WEFT_GPUS_PER_NODE="$g" bash -c \
    "'$T' collectives --ranks $N --counts $COUNTS --only AllReduce; a=\$?; '$T' collectives --ranks $N --counts $COUNTS --only AllGather; exit \$((a | \$?))"
done

# ---- collect ----------------------------------------------------------------------------
# bench.csv: every bench step's rows, the step first. A step cut by its timeout left no CSV:
# its rows come from the table it printed.
echo "step,collective,bytes,count,type,weft_us,weft_algbw,weft_busbw,weft_wrong,weft_tbs,nccl_us,nccl_algbw,nccl_busbw,nccl_wrong,nccl_tbs" >"$OUT/bench.csv"
for f in "$TMP"/bench*.log "$TMP"/hm_[0-9]*.log "$TMP"/ring_compiled.log; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .log)
  if [ -s "$TMP/$name.csv" ]; then
    tail -n +2 "$TMP/$name.csv" | sed "s/^/$name,/" >>"$OUT/bench.csv"
  else
    awk -v step="$name" '
      /^# [A-Za-z]+  / { coll = $2 }
      /^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +\|/ {
        split($0, p, "|"); split(p[1], a, " "); split(p[2], w, " "); split(p[3], n, " ")
        if (w[1] ~ /^-+$/) { w[1] = 0; w[2] = 0; w[3] = 0; w[4] = -1; w[5] = 0 }
        if (n[1] ~ /^-+$/) { n[1] = 0; n[2] = 0; n[3] = 0; n[4] = -1; n[5] = 0 }
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", step, coll, a[1], a[2], a[3],
               w[1], w[2], w[3], w[4], w[5], n[1], n[2], n[3], n[4], n[5] }' "$f" >>"$OUT/bench.csv"
  fi
done
# The simulator had the whole round; it gets ROUND_SIM_WAIT_S (20) seconds more at most.
for _ in $(seq "${ROUND_SIM_WAIT_S:-20}"); do kill -0 "$SIMPID" 2>/dev/null || break; sleep 1; done
kill "$SIMPID" 2>/dev/null && note "simulator: cut after the round (rows so far kept)"
wait "$SIMPID" 2>/dev/null
cat "$TMP/sim.err" >>"$ALL" 2>/dev/null
note "simulator: $(grep -c '"busbw_GBps"' "$OUT/sim.jsonl") predictions, $(grep -c '"error"' "$OUT/sim.jsonl") refused (sim.jsonl)"
if command -v python3 >/dev/null && [ -f "$B/round_tables.py" ]; then
  python3 "$B/round_tables.py" "$OUT" >"$OUT/tables.md" 2>>"$ALL" || note "round_tables.py failed (see all.log)"
fi

# ---- summary ----------------------------------------------------------------------------
note "---- failures (first 20):"
# (never_joins and the peer_stops tests provoke their errors on purpose: their rc says whether they passed.)
awk '/^==== / { s = $2 } s != "never_joins" && s != "peer_stops" && s != "peer_stops_oneshot" && /FAIL|timed out|failed|still running|exited with/' "$ALL" |
  head -n 20 | cut -c1-200 | tee -a "$SUMMARY"
note "---- #wrong != 0 in bench.csv: $(awk -F, 'NR > 1 && (($9 != 0 && $9 != -1) || ($14 != 0 && $14 != -1))' "$OUT/bench.csv" | wc -l) rows of $(($(wc -l <"$OUT/bench.csv") - 1))"
note "---- bench (step collective size: weft us busbw TBs | nccl us busbw TBs):"
awk -F, 'NR > 1 && ($3 == 8 || $3 == 32768 || $3 == 2097152 || $3 == 134217728 || $3 >= 1073741824) {
  printf "%-14s %-13s %10s: %9.2f %7.1f %3d | %9.2f %7.1f %3d\n", $1, $2, $3, $6, $8, $10, $11, $13, $15 }' "$OUT/bench.csv" |
  tee -a "$SUMMARY"
note "elapsed: $(elapsed) s of a $BUDGET s budget; files: $(ls "$OUT" | tr '\n' ' ')"
rm -rf "$TMP"
