#!/usr/bin/env bash
# compute-sanitizer over every kernel weft launches (plan interpreter, one-shot, point-to-point,
# the one-rank copy, and the average's division), with 1, 2 and 4 ranks; with fewer GPUs than
# ranks the ranks share them (correctness only). Prints a Markdown table of errors per tool and
# case (docs/testing.md keeps the last one) and exits 1 if any case reports an error or fails.
# Usage: tests/gpu/run_sanitizers.sh BUILD_DIR [TOOLS]   (TOOLS default: memcheck racecheck synccheck initcheck)
# BUILD_DIR is a build tree or a GPU bundle (both hold bin/weft_gpu_tests). SAN_CASES, an
# extended regex, keeps the cases whose names match (default: all); SAN_CAP_S caps each run
# (default 900 s).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:?build dir}
TOOLS=${2:-memcheck racecheck synccheck initcheck}
OUT=${OUT:-$PWD/sanitizer-out}
mkdir -p "$OUT"
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
T=$B/bin/weft_gpu_tests
# Sanitized kernels run many times slower, and ranks sharing a GPU take turns: a long deadline.
export WEFT_TIMEOUT=${WEFT_TIMEOUT:-300}

# name | arguments of weft_gpu_tests
CASES=(
  "copy, 1 rank|collectives --ranks 1 --counts 7,1048579 --type float32"
  "one-shot, 2 ranks|collectives --ranks 2 --counts 7,1024 --only AllReduce --type int8"
  "one-shot, 4 ranks|collectives --ranks 4 --counts 1024 --only AllReduce --type float32"
  "interpreter, 2 ranks|collectives --ranks 2 --counts 1048579 --only AllReduce --type int8"
  "interpreter, all six collectives, 2 ranks|collectives --ranks 2 --counts 300007 --type bfloat16"
  "interpreter, 4 ranks|collectives --ranks 4 --counts 1048579 --only AllReduce --type float32"
  "p2p, 2 ranks|p2p --ranks 2"
  "p2p, 4 ranks|p2p --ranks 4"
)

status=0
header="| case |"
rule="| --- |"
for tool in $TOOLS; do header+=" $tool |"; rule+=" --- |"; done
rows=()
for c in "${CASES[@]}"; do
  name=${c%%|*}
  [[ $name =~ ${SAN_CASES:-.} ]] || continue
  args=${c#*|}
  row="| $name |"
  for tool in $TOOLS; do
    log="$OUT/$(echo "$name-$tool" | tr -c 'A-Za-z0-9\n-' '_').log"
    extra=()
    [ "$tool" = racecheck ] && extra=(--racecheck-report all)
    timeout -k 10 "${SAN_CAP_S:-900}" "$CS" --tool "$tool" --target-processes all "${extra[@]}" $T $args > "$log" 2>&1
    rc=$?
    # One summary line per process: "ERROR SUMMARY: N errors", racecheck's "(N errors, M warnings)".
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | awk '{s += $3} END {print s + 0}')
    rerrs=$(grep -Eo '\(([0-9]+) errors?, ([0-9]+) warnings?\)' "$log" | tr -d '(),' | awk '{e += $1; w += $3} END {print e + 0, w + 0}')
    set -- $rerrs
    if [ "$tool" = racecheck ]; then cell="$1 errors, $2 warnings"; errs=$(( errs + $1 )); else cell="$errs errors"; fi
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then cell+=" (test rc=$rc)"; status=1; fi
    [ "$rc" -eq 77 ] && cell="skipped (no GPU)"
    [ "$errs" -ne 0 ] && status=1
    row+=" $cell |"
    echo "$name / $tool: rc=$rc, $cell" >&2
  done
  rows+=("$row")
done
{
  echo "compute-sanitizer: $("$CS" --version | tail -n 1); GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1) x $(nvidia-smi -L | wc -l)"
  echo
  echo "$header"
  echo "$rule"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/sanitizers.md"
exit $status
