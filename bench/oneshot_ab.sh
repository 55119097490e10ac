#!/usr/bin/env bash
# The one-shot kernel's session-9 changes against what runs without them, beside NCCL, on the
# machine's GPUs (one rank per GPU; docs/runtime.md, "The one-shot kernel"), in one device call
# of at most ROUND_BUDGET_S (default 240) seconds:
#   pdl     AllReduce 8 B - 256 KiB in CUDA graphs, the default (programmatic dependent launch)
#           against WEFT_ONESHOT_PDL=0, twice each, alternating;
#   a2a     AllToAll 8 B - 4 MiB, plain and in graphs: the table's plans against the kernel
#           (WEFT_ALGO=AllToAll:oneshot, up to 1 MiB per peer);
#   rooted  Broadcast and Reduce 8 B - 1 MiB plain: the table against the kernel
#           (WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot);
#   big     AllReduce 256 KiB - 4 MiB plain: the table against the kernel up to 1 MiB
#           (WEFT_ALGO=oneshot), LL128 and LL plans (WEFT_PROTO).
# Each step prints `weft bench`'s table (weft, NCCL, speedup, the plan it ran).
#
#   bench/oneshot_ab.sh BUNDLE [STEP...]   (BUNDLE from scripts/make_gpu_bundle.sh; steps default: all four)
#
# Environment: OUT (logs, default ./oneshot-ab-out), ROUND_BUDGET_S, RANKS (default 0: every GPU).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$(cd "${1:?usage: bench/oneshot_ab.sh BUNDLE [pdl] [a2a] [rooted] [big]}" && pwd -P)
shift
W=$B/bin/weft
[ -x "$W" ] || { echo "oneshot_ab.sh: $B has no bin/weft (make it with scripts/make_gpu_bundle.sh)" >&2; exit 2; }
STEPS=${*:-pdl a2a rooted big}
OUT=${OUT:-$PWD/oneshot-ab-out}
mkdir -p "$OUT"
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=${WEFT_TIMEOUT:-20} WEFT_LOG_LEVEL=${WEFT_LOG_LEVEL:-WARN}
R=${RANKS:-0}
T0=$(date +%s)
left() { echo $(( ${ROUND_BUDGET_S:-240} - ($(date +%s) - T0) )); }
# ab NAME LIMIT ENV ARGS...: one `weft bench` under ENV ("-" for none), its table printed
ab() {
  local n=$1 t=$2 e=$3
  shift 3
  [ "$(left)" -lt 15 ] && { echo "## $n: not run (budget spent)"; return; }
  [ "$t" -gt "$(left)" ] && t=$(left)
  [ "$e" = - ] && e=
  echo "## $n ${e:-(default)}"
  # shellcheck disable=SC2086  # ENV is a list of assignments
  timeout -k 3 "$t" env $e "$W" bench "$@" --ranks "$R" --no-sim > "$OUT/$n.txt" 2>&1
  echo "## rc=$?"
  grep -v '^ *$' "$OUT/$n.txt" | grep -v '^#$' | tail -n 20
}
for s in $STEPS; do
  case $s in
    pdl)
      for rep in 1 2; do
        ab "pdl_on_$rep" 40 - AllReduce --sizes 8:256K --factor 8 --iters 200 --graph
        ab "pdl_off_$rep" 40 WEFT_ONESHOT_PDL=0 AllReduce --sizes 8:256K --factor 8 --iters 200 --graph
      done ;;
    a2a)
      for v in "table:-" "kernel:WEFT_ALGO=AllToAll:oneshot"; do
        ab "a2a_${v%%:*}" 45 "${v#*:}" AllToAll --sizes 8:4M --factor 8 --iters 50
        ab "a2a_${v%%:*}_graph" 40 "${v#*:}" AllToAll --sizes 8:256K --factor 8 --iters 100 --graph
      done ;;
    rooted)
      for v in "table:-" "kernel:WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot"; do
        ab "rooted_${v%%:*}" 50 "${v#*:}" Broadcast Reduce --sizes 8:1M --factor 8 --iters 50
      done ;;
    big)
      for v in "table:-" "kernel:WEFT_ALGO=oneshot" "ll128:WEFT_PROTO=LL128" "ll:WEFT_PROTO=LL"; do
        ab "big_${v%%:*}" 35 "${v#*:}" AllReduce --sizes 256K:4M --factor 2 --iters 50
      done ;;
    *) echo "oneshot_ab.sh: unknown step '$s' (pdl, a2a, rooted, big)" >&2; exit 2 ;;
  esac
done
echo "## done in $(( $(date +%s) - T0 )) s"
