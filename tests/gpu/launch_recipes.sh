#!/usr/bin/env bash
# docs/multi-node.md's launch recipes on one machine (label gpu): examples/allreduce.c
# (weftCommInitFromEnv, an in-place AllReduce checked element by element) as 2 rank processes
# on 2 fake hosts (WEFT_HOST_ID a / b: the real multi-host path, every byte through UCX),
# started with the variables torchrun gives its ranks (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT) and those of Open MPI's mpirun (OMPI_COMM_WORLD_*, with
# WEFT_BOOTSTRAP_ADDR), each with WEFT_BOOTSTRAP_SECRET and UCX_TLS=tcp UCX_NET_DEVICES=lo as the
# recipes set them; then UCX_NET_DEVICES naming a device no host has: both ranks fail within
# 60 s, and the error names UCX_NET_DEVICES and `ucx_info -d`. Exits 77 without a GPU.
# Usage: launch_recipes.sh EXAMPLE_ALLREDUCE
set -u
X=${1:?usage: launch_recipes.sh EXAMPLE_ALLREDUCE}
[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 1 ] || { echo "launch_recipes: no GPU: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
fail() { echo "launch_recipes: $*"; for f in "$T"/*.log; do echo "--- $f"; tail -n 5 "$f"; done; exit 1; }
port() { echo $((20000 + (RANDOM % 20000))); }

# launch NAME EXPECT(ok|fail) ENV_OF_RANK_0 -- ENV_OF_RANK_1: 2 ranks, each under a 60 s timeout.
launch() {
  local name=$1 expect=$2 r0=() r1=() pids=() rc r
  shift 2
  while [ "$1" != -- ]; do r0+=("$1"); shift; done
  shift
  r1=("$@")
  env "${r0[@]}" timeout -k 5 60 "$X" > "$T/$name.0.log" 2>&1 & pids+=($!)
  env "${r1[@]}" timeout -k 5 60 "$X" > "$T/$name.1.log" 2>&1 & pids+=($!)
  for r in 0 1; do
    wait "${pids[$r]}"; rc=$?
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "$name: rank $r did not end within 60 s"
    if [ "$expect" = ok ]; then
      [ "$rc" = 0 ] || fail "$name: rank $r exited $rc"
      grep -q "^rank $r of 2: 0 of 1048576 elements wrong" "$T/$name.$r.log" || fail "$name: rank $r did not check its result"
    else
      [ "$rc" != 0 ] || fail "$name: rank $r succeeded where UCX cannot reach its peer"
    fi
  done
  echo "launch_recipes: $name: as expected ($expect)"
}
COMMON=(WEFT_BOOTSTRAP_SECRET="$SECRET" UCX_TLS=tcp UCX_NET_DEVICES=lo WEFT_TIMEOUT=30)
# torchrun --nnodes 2 --nproc-per-node 1: each host's rank has LOCAL_RANK 0 (here: one GPU each where there are 2).
P=$(port)
launch torchrun ok "${COMMON[@]}" WEFT_HOST_ID=a RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P -- \
  "${COMMON[@]}" WEFT_HOST_ID=b RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P
P=$(port)
launch mpirun ok "${COMMON[@]}" WEFT_HOST_ID=a OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  WEFT_BOOTSTRAP_ADDR=127.0.0.1:$P -- \
  "${COMMON[@]}" WEFT_HOST_ID=b OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 \
  WEFT_BOOTSTRAP_ADDR=127.0.0.1:$P
P=$(port)
BAD=(WEFT_BOOTSTRAP_SECRET="$SECRET" UCX_TLS=tcp UCX_NET_DEVICES=eth9weft WEFT_TIMEOUT=30)
launch no_device fail "${BAD[@]}" WEFT_HOST_ID=a RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P -- \
  "${BAD[@]}" WEFT_HOST_ID=b RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P
cat "$T"/no_device.*.log | grep -q "UCX_NET_DEVICES='eth9weft'" || fail "no_device: no error names UCX_NET_DEVICES='eth9weft'"
cat "$T"/no_device.*.log | grep -q "ucx_info -d" || fail "no_device: no error says to look at ucx_info -d"
echo "launch_recipes: ok"
