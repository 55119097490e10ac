#!/usr/bin/env bash
# bench/oneshot_pdl_mps.sh BUNDLE (a bundle of scripts/make_gpu_bundle.sh): one GPU
# under CUDA MPS (both ranks' kernels resident at once): AllReduce in CUDA graphs
# with and without WEFT_ONESHOT_PDL, alternating, as a diagnosis of the gap between
# back-to-back graph nodes (ranks sharing one GPU: not a two-GPU time).
set -u
B=$(cd "${1:?usage: bench/oneshot_pdl_mps.sh BUNDLE}" && pwd); W=$B/bin/weft
export WEFT_DATA_DIR=$B/share/weft WEFT_TIMEOUT=20 WEFT_LOG_LEVEL=WARN
export CUDA_MPS_PIPE_DIRECTORY=/tmp/weft-mps CUDA_MPS_LOG_DIRECTORY=/tmp/weft-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && echo "# mps started"
trap 'echo quit | nvidia-cuda-mps-control; sleep 1' EXIT
for rep in 1 2 3; do
  for pdl in 0 1; do
    echo "## rep $rep WEFT_ONESHOT_PDL=$pdl"
    WEFT_ONESHOT_PDL=$pdl timeout 40 "$W" bench AllReduce --ranks 2 --sizes 8:32K --factor 8 --graph --iters 200 --warmup 20 --no-sim --no-nccl 2>&1 | grep -v '^ *$' | tail -n 8
  done
done
echo "## plain (no graph), rep 1"
for pdl in 0 1; do
  WEFT_ONESHOT_PDL=$pdl timeout 40 "$W" bench AllReduce --ranks 2 --sizes 8:32K --factor 8 --iters 200 --warmup 20 --no-sim --no-nccl 2>&1 | grep -v '^ *$' | tail -n 6
done
