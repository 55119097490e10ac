#!/bin/bash
# One round of the NCCL-compatibility checks, 2 ranks, on a machine with 2 GPUs
# (nvidia-h200-x2) or with one (nvidia-h100-x1: both ranks share it):
#   1. NVIDIA's nccl-tests (all_reduce, all_gather, reduce_scatter, broadcast, reduce,
#      alltoall, sendrecv; 8 B to 1 GiB, -c 1) with one thread per rank (-t 2) and with one
#      process per rank (mpirun -np 2), each on weft's libnccl.so.2 and on the real NCCL;
#   2. the PyTorch check (tests/gpu/nccl/torch_check.py) on weft (weft's libnccl.so.2 first on
#      LD_LIBRARY_PATH and in LD_PRELOAD) and on NCCL, compared with torch_compare.py;
#   3. nccl_api_gpu_tests (split, PreMulSum, gather/scatter, groups, fallback) when carried,
#      right after the PyTorch check (before the MPI rows).
# One GPU (nvidia-smi's count, or CUDA_VISIBLE_DEVICES' entries when fewer; ROUND_GPUS=N
# overrides both): the two ranks share device 0, which checks correctness only (every row and
# the summary say so; #wrong must still be 0). nccl-tests gives rank i device i with no
# wrap-around, so -t 2 runs with gpu_share_preload.c preloaded (device d -> d % GPUs; built
# here with cc, else CARRY/lib/libgpu_share_preload.so) and mpirun with NCCL_TESTS_DEVICE=0
# (every process on device 0). The real NCCL refuses two ranks on one GPU ("Duplicate GPU
# detected"): its nccl-tests rows, its PyTorch run and the comparison are skipped with a note.
# Usage: tests/gpu/nccl/run_nccl_round.sh [CARRY_DIR]
#   CARRY_DIR holds what was built elsewhere (default: .wt/nccl/nccl-carry or nccl-carry in
#   the repository): lib/libweft_nccl.so, nccl-tests/*_perf[_ompi|_mpich] with
#   nccl-tests/verifiable/libverifiable.so.0, bin/nccl_api_gpu_tests (optional).
#   WEFT_BUILD=DIR takes weft's library and the API tests from a build folder instead
#   (DIR/lib/libweft_nccl.so, DIR/bin/nccl_api_gpu_tests: weft built there from this
#   checkout), keeping the carried nccl-tests.
# Every path the round links, preloads or runs is made absolute first (a relative CARRY once
# made a dangling libnccl.so.2 link, and the loader silently fell through to the system NCCL).
# A weft row counts only if the library that answered is weft's: before running, `ldd` must
# resolve each binary's libnccl.so.2 to weft's file; after, nccl-tests' nccl-library must be
# 22800 and the PyTorch check must find weft behind libtorch_cuda.so's calls. Otherwise the
# round says so at once, stops running weft rows, and fails.
# Writes at most 8 files under $OUT (default /tmp/weft-nccl-round); the summary comes last.
# Bounded: every step has a timeout (at most 120 s, the PyTorch check's 100 s plus its kill
# grace), and no step starts after ROUND_BUDGET_S (default 215) seconds, so the round ends
# within ROUND_BUDGET_S + 120 s (about 4 minutes when every step behaves; less on one GPU,
# where NCCL's rows do not run).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
BUDGET=${ROUND_BUDGET_S:-215}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE="$ROOT/tests/gpu/nccl"
CARRY=${1:-}
if [ -z "$CARRY" ]; then
  for c in "$ROOT/.wt/nccl/nccl-carry" "$ROOT/nccl-carry"; do [ -d "$c" ] && CARRY=$c && break; done
fi
# Absolute, symlinks resolved: links made below must not depend on the current directory.
CARRY_GIVEN=$CARRY
if [ -n "$CARRY" ]; then
  if [ -d "$CARRY" ]; then CARRY=$(cd "$CARRY" && pwd -P); else CARRY=""; fi
fi
# Where weft's library and the API tests come from: WEFT_BUILD, else the carry.
WEFT_FROM=${CARRY:-/nonexistent}
WEFT_BUILD_GIVEN=${WEFT_BUILD:-}
if [ -n "$WEFT_BUILD_GIVEN" ]; then
  if [ -d "$WEFT_BUILD_GIVEN" ]; then WEFT_FROM=$(cd "$WEFT_BUILD_GIVEN" && pwd -P); else WEFT_FROM=/nonexistent; fi
fi
OUT=${OUT:-/tmp/weft-nccl-round}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
PRE="$OUT/prereq.log"; WLOG="$OUT/nccltests_weft.log"; NLOG="$OUT/nccltests_nccl.log"
SUM="$OUT/summary.txt"; ALOG="$OUT/api_tests.log"
: >"$PRE"; : >"$WLOG"; : >"$NLOG"; : >"$SUM"; : >"$ALOG"
rm -f "$OUT/torch_weft.json" "$OUT/torch_nccl.json"
TMP=$(mktemp -d /tmp/weft-nccl-XXXXXX)
TESTS="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"
NT_ARGS=${NT_ARGS:--b 8 -e 1G -f 8 -g 1 -c 1 -n 4 -w 1}
MISSING=()

say() { echo "$*" | tee -a "$PRE"; }
elapsed() { echo $(( $(date +%s) - START )); }
have_time() { [ "$(elapsed)" -lt "$BUDGET" ]; }

say "== weft NCCL-compat round, $(date -u +%FT%TZ), host $(hostname)"
say "repository: $ROOT"
say "carry: ${CARRY:-<none found>}${CARRY_GIVEN:+ (given as $CARRY_GIVEN)}"
[ -n "$CARRY_GIVEN" ] && [ -z "$CARRY" ] && MISSING+=("the carry folder $CARRY_GIVEN (not a directory)")
if [ -n "$WEFT_BUILD_GIVEN" ]; then
  say "weft's library and API tests from WEFT_BUILD=$WEFT_BUILD_GIVEN ($WEFT_FROM)"
  [ -d "$WEFT_BUILD_GIVEN" ] || MISSING+=("the build folder WEFT_BUILD=$WEFT_BUILD_GIVEN (not a directory)")
fi

# ---- prerequisites -------------------------------------------------------------------
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L >>"$PRE" 2>&1
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  nvidia-smi topo -m >>"$PRE" 2>&1
else
  say "nvidia-smi: not found"
fi
# CUDA sees only CUDA_VISIBLE_DEVICES' entries (nvidia-smi ignores it).
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
  NVIS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  [ "$NVIS" -lt "$NGPU" ] && say "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES: $NVIS of $NGPU GPUs visible" && NGPU=$NVIS
fi
if [ -n "${ROUND_GPUS:-}" ]; then
  case "$ROUND_GPUS" in
    [0-9]|[0-9][0-9])
      say "ROUND_GPUS=$ROUND_GPUS: assuming $ROUND_GPUS GPUs (found $NGPU)"
      # One GPU of several: CUDA must see one too, or the preload would not wrap device 1.
      if [ "$ROUND_GPUS" = 1 ] && [ "$NGPU" -gt 1 ]; then
        V=${CUDA_VISIBLE_DEVICES:-0}; export CUDA_VISIBLE_DEVICES=${V%%,*}
        say "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES (one GPU)"
      fi
      NGPU=$ROUND_GPUS;;
    *) say "ROUND_GPUS=$ROUND_GPUS is not a GPU count; ignored";;
  esac
fi
say "GPUs: $NGPU"
[ "$NGPU" -ge 1 ] || MISSING+=("a GPU (found none)")
SHARED=0      # 1: the two ranks share one GPU (correctness only; NCCL's rows do not run)
SHARENOTE="shared GPU: correctness only (timings not comparable)"
SHIM=""       # the LD_PRELOAD library that shows nccl-tests -t 2 two devices over one
if [ "$NGPU" = 1 ]; then
  SHARED=1
  say "one GPU: 2 ranks share it ($SHARENOTE); NCCL refuses two ranks on one GPU, so its rows are skipped"
  if command -v cc >/dev/null 2>&1 &&
     cc -shared -fPIC -O2 -o "$TMP/libgpu_share_preload.so" "$HERE/gpu_share_preload.c" -ldl >>"$PRE" 2>&1; then
    SHIM="$TMP/libgpu_share_preload.so"
  elif [ -n "$CARRY" ] && [ -f "$CARRY/lib/libgpu_share_preload.so" ]; then
    SHIM="$CARRY/lib/libgpu_share_preload.so"
  else
    MISSING+=("the device-sharing preload for -t 2 (cc to build $HERE/gpu_share_preload.c, or CARRY/lib/libgpu_share_preload.so)")
  fi
  [ -n "$SHIM" ] && say "device-sharing preload for -t 2: $SHIM"
fi

WEFTLIB=""    # a folder whose libnccl.so.2 is an absolute link to weft's library
WEFTSO=""     # weft's library itself, absolute, symlinks resolved
if [ -f "$WEFT_FROM/lib/libweft_nccl.so" ]; then
  WEFTSO=$(readlink -f "$WEFT_FROM/lib/libweft_nccl.so")
  mkdir -p "$TMP/weft"
  ln -sfn "$WEFTSO" "$TMP/weft/libnccl.so.2"
  if [ "$(readlink -f "$TMP/weft/libnccl.so.2")" = "$WEFTSO" ] && [ -f "$TMP/weft/libnccl.so.2" ]; then
    WEFTLIB="$TMP/weft"
    say "weft library: $WEFTSO ($(du -h "$WEFTSO" | cut -f1)), as $WEFTLIB/libnccl.so.2"
  else
    say "FAIL: $TMP/weft/libnccl.so.2 does not lead to $WEFTSO"
    MISSING+=("a working link to weft's library")
  fi
else
  MISSING+=("weft's library ($WEFT_FROM/lib/libweft_nccl.so)")
fi
export WEFT_NCCL_EXPECT_LIB=$WEFTSO   # what torch_check.py and nccl_api_gpu_tests accept as weft

# resolves BINARY LIBDIR [EXTRA_LD_PATH]: the file the loader would pick for BINARY's
# libnccl.so.2 with LIBDIR first on LD_LIBRARY_PATH (absolute, symlinks resolved).
resolves() {
  local p
  p=$(env LD_LIBRARY_PATH="$2${3:+:$3}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1" 2>/dev/null |
      awk '$1 == "libnccl.so.2" {print $3; exit}')
  [ -n "$p" ] && [ "$p" != "not" ] && readlink -f "$p" || echo "nothing"
}
NTDIR="${CARRY:-/nonexistent}/nccl-tests"
for t in $TESTS; do [ -x "$NTDIR/${t}_perf" ] || MISSING+=("nccl-tests binary $NTDIR/${t}_perf"); done

PY=$(command -v python3 || true)
HAVE_TORCH=0
if [ -n "$PY" ] && "$PY" -c 'import torch, torch.distributed' >>"$PRE" 2>&1; then
  HAVE_TORCH=1
  say "python3: $PY, torch $("$PY" -c 'import torch; print(torch.__version__, torch.cuda.device_count(), "GPUs")' 2>&1)"
else
  MISSING+=("python3 with torch")
fi

# Every NCCL function libtorch_cuda.so calls must exist in weft's library (else the first
# call of a missing one ends the process).
if [ "$HAVE_TORCH" = 1 ] && [ -n "$WEFTLIB" ] && command -v nm >/dev/null 2>&1; then
  TLIB=$("$PY" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
  if [ -f "$TLIB" ]; then
    say "libtorch_cuda.so's NCCL: $(ldd "$TLIB" 2>/dev/null | awk '/libnccl/ {print $3}')"
    NEED=$(nm -D --undefined-only "$TLIB" 2>/dev/null | awk '{print $NF}' | grep -E '^p?nccl' | sort -u)
    HAVE=$(nm -D --defined-only "$WEFTSO" | awk '{print $NF}' | sort -u)
    LACK=$(comm -23 <(echo "$NEED") <(echo "$HAVE") | tr '\n' ' ')
    say "libtorch_cuda.so calls $(echo "$NEED" | grep -c .) NCCL functions; missing in weft: ${LACK:-none}"
  fi
fi

# The real NCCL: $NCCL_LIB, PyTorch's wheel (nvidia-nccl-cu13), the CUDA toolkit, the system.
find_real_nccl() {
  local cands=()
  [ -n "${NCCL_LIB:-}" ] && cands+=("$NCCL_LIB")
  if [ "$HAVE_TORCH" = 1 ]; then
    while read -r p; do [ -n "$p" ] && cands+=("$p"); done < <("$PY" - <<'PYEOF' 2>/dev/null
import glob, os, site, sys, importlib.util
roots = set(site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p])
for mod in ("nvidia.nccl", "nvidia"):
    try:
        spec = importlib.util.find_spec(mod)
        if spec and spec.submodule_search_locations:
            roots.update(spec.submodule_search_locations)
    except Exception:
        pass
for r in sorted(roots):
    for pat in ("nvidia/nccl/lib/libnccl.so.2", "nccl/lib/libnccl.so.2", "lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2"):
        for p in glob.glob(os.path.join(r, pat)):
            print(os.path.realpath(p))
import torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
print(os.path.realpath(os.path.join(lib, "libnccl.so.2")))
PYEOF
)
  fi
  cands+=(/usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2)
  local p
  p=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}'); [ -n "$p" ] && cands+=("$p")
  for p in "${cands[@]}"; do
    [ -f "$p" ] || continue
    p=$(readlink -f "$p")
    # Not weft's own library under NCCL's name.
    if nm -D --defined-only "$p" 2>/dev/null | grep -q ' ncclGetVersion$' && \
       ! cmp -s "$p" "${WEFTSO:-/nonexistent}"; then
      echo "$p"; return
    fi
  done
}
REALNCCL=$(find_real_nccl)
if [ -n "$REALNCCL" ]; then
  NCCLDIR="$TMP/nccl"; mkdir -p "$NCCLDIR"; ln -sfn "$REALNCCL" "$NCCLDIR/libnccl.so.2"
  say "real NCCL: $REALNCCL"
else
  NCCLDIR=""
  MISSING+=("a real libnccl.so.2 (searched NCCL_LIB, PyTorch's nvidia-nccl wheel, /usr/local/cuda, ldconfig)")
fi

# mpirun: which MPI, and which nccl-tests build matches it.
MPIRUN=""
for m in mpirun mpiexec /usr/local/mpi/bin/mpirun /opt/hpcx/ompi/bin/mpirun /usr/lib64/openmpi/bin/mpirun /opt/openmpi/bin/mpirun; do
  p=$(command -v "$m" 2>/dev/null || true); [ -n "$p" ] && MPIRUN=$p && break
done
MPIFLAV=""; MPIARGS=(); MPILIBDIRS=""
if [ -n "$MPIRUN" ]; then
  V=$("$MPIRUN" --version 2>&1 | head -3 | tr '\n' ' ')
  say "mpirun: $MPIRUN ($V)"
  MPIBASE=$(cd "$(dirname "$(readlink -f "$MPIRUN")")/.." && pwd)
  MPILIBDIRS="$MPIBASE/lib:$MPIBASE/lib64:$MPIBASE/lib/x86_64-linux-gnu"
  case "$V" in
    *"Open MPI"*|*OpenRTE*|*"Open RTE"*)
      MPIFLAV=ompi
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      # Only the bootstrap travels over MPI: TCP is enough and avoids shared-memory transports
      # that containers sometimes refuse.
      MPIARGS=(--allow-run-as-root --bind-to none --mca btl self,tcp --mca pml ob1 --mca coll ^hcoll
               -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS
               -x WEFT_LOG_LEVEL)
      # One GPU: nccl-tests puts every process on NCCL_TESTS_DEVICE (else local rank i on device i).
      [ "$SHARED" = 1 ] && MPIARGS+=(-x NCCL_TESTS_DEVICE);;
    *HYDRA*|*MPICH*|*"Intel(R) MPI"*|*MVAPICH*) MPIFLAV=mpich; MPIARGS=(-genvall);;
    *) say "mpirun: unknown flavour; trying it as Open MPI"; MPIFLAV=ompi; MPIARGS=(--allow-run-as-root -x LD_LIBRARY_PATH);;
  esac
  for t in $TESTS; do [ -x "$NTDIR/${t}_perf_$MPIFLAV" ] || MISSING+=("nccl-tests binary $NTDIR/${t}_perf_$MPIFLAV"); done
else
  MISSING+=("mpirun (searched PATH, /usr/local/mpi, /opt/hpcx, /usr/lib64/openmpi, /opt/openmpi)")
fi
export WEFT_LOG_LEVEL=${WEFT_LOG_LEVEL:-WARN}

# Before anything runs: every binary that is to run on weft must resolve libnccl.so.2 to
# weft's file. One that does not is reported now and its rows fail without running.
declare -A LOADER_BAD
check_loader() {  # check_loader NAME BINARY [EXTRA_LD_PATH]
  [ -n "$WEFTLIB" ] && [ -x "$2" ] || return 0
  local got; got=$(resolves "$2" "$WEFTLIB" "${3:-}")
  if [ "$got" = "$WEFTSO" ]; then
    say "loader: $1 -> $got (weft)"
  else
    say "FAIL: loader: $1 would load $got as libnccl.so.2, not weft's $WEFTSO"
    LOADER_BAD[$1]=$got
  fi
}
check_loader t2 "$NTDIR/all_reduce_perf"
[ -n "$MPIFLAV" ] && check_loader mpi "$NTDIR/all_reduce_perf_$MPIFLAV" "$MPILIBDIRS"
check_loader api "$WEFT_FROM/bin/nccl_api_gpu_tests"

if [ ${#MISSING[@]} -gt 0 ]; then
  say "MISSING:"; for m in "${MISSING[@]}"; do say "  - $m"; done
fi
if [ "$NGPU" -lt 1 ]; then
  say "this round needs a GPU (2 GPUs for timings; one is shared by both ranks); stopping after the prerequisites."
  { echo "== summary"; echo "NO GPU: prerequisites checked, nothing run (see prereq.log)";
    for m in "${MISSING[@]}"; do echo "missing: $m"; done
    for k in "${!LOADER_BAD[@]}"; do echo "loader: $k would load ${LOADER_BAD[$k]}, not weft"; done
    echo "elapsed: $(elapsed) s"
    echo "OVERALL: FAIL (not run: this round needs a GPU, found none)"; } | tee -a "$SUM"
  rm -rf "$TMP"; exit 1
fi

# ---- nccl-tests ----------------------------------------------------------------------
declare -A RC WRONG ROWS LIBV BW AVG
WRONG_LIB=""   # set when a weft row was answered by another library: later weft rows do not run
# run_nt LIB(weft|nccl) MODE(t2|mpi) TEST
run_nt() {
  local lib=$1 mode=$2 t=$3 libdir log key=$1.$2.$3 f="$TMP/$1.$2.$3.out"
  if [ "$lib" = weft ]; then libdir=$WEFTLIB; log=$WLOG; else libdir=$NCCLDIR; log=$NLOG; fi
  if [ "$lib" = nccl ] && [ "$SHARED" = 1 ]; then RC[$key]=shared; return; fi
  if [ -z "$libdir" ]; then RC[$key]=skip; return; fi
  # One process's threads on one GPU cannot run nccl-tests: its CheckDelta calls
  # cudaDeviceSynchronize, which waits for the other thread's collective kernel while that
  # kernel waits for this thread's next call (one context, one device). Ranks in processes
  # of their own (the mpi rows) share the GPU without that. WEFT_ROUND_T2_SHARED=1 runs them
  # anyway, to show the hang.
  if [ "$mode" = t2 ] && [ "$SHARED" = 1 ] && [ -z "${WEFT_ROUND_T2_SHARED:-}" ]; then RC[$key]=onegpu; return; fi
  if [ "$mode" = t2 ] && [ "$SHARED" = 1 ] && [ -z "$SHIM" ]; then RC[$key]=noshim; return; fi
  if [ "$lib" = weft ] && [ -n "${LOADER_BAD[$mode]:-}" ]; then RC[$key]=loader; return; fi
  if [ "$lib" = weft ] && [ -n "$WRONG_LIB" ]; then RC[$key]=notweft; return; fi
  if ! have_time; then RC[$key]=time; return; fi
  local cmd share=()
  if [ "$mode" = t2 ]; then
    # One GPU: thread i asks for device i; the preload maps it to device 0.
    [ "$SHARED" = 1 ] && share=(WEFT_SHARE_GPU_DEVICES=2 LD_PRELOAD="$SHIM")
    cmd=(timeout -k 5 45 env LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ${share[@]+"${share[@]}"}
         "$NTDIR/${t}_perf" -t 2 $NT_ARGS)
  else
    [ -n "$MPIFLAV" ] || { RC[$key]=skip; return; }
    [ "$SHARED" = 1 ] && share=(NCCL_TESTS_DEVICE=0)
    cmd=(timeout -k 10 60 env LD_LIBRARY_PATH="$libdir:$MPILIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ${share[@]+"${share[@]}"}
         "$MPIRUN" -np 2 "${MPIARGS[@]}" "$NTDIR/${t}_perf_$MPIFLAV" -t 1 $NT_ARGS)
  fi
  { echo; echo "######## $lib $mode $t: ${cmd[*]}"; } >>"$log"
  local s=$(date +%s.%N)
  "${cmd[@]}" >"$f" 2>&1
  RC[$key]=$?
  cat "$f" >>"$log"
  echo "######## exit ${RC[$key]}, $(echo "$(date +%s.%N) - $s" | bc 2>/dev/null || echo '?') s" >>"$log"
  # Rows: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
  ROWS[$key]=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {n++} END {print n+0}' "$f")
  WRONG[$key]=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {if ($9 ~ /^[0-9.e+]+$/) w += $9; if ($13 ~ /^[0-9.e+]+$/) w += $13} END {print w+0}' "$f")
  LIBV[$key]=$(sed -n 's/.*nccl-library=\([0-9]*\).*/\1/p' "$f" | head -1)
  if [ "$lib" = weft ] && [ -n "${LIBV[$key]:-}" ] && [ "${LIBV[$key]}" != 22800 ]; then
    # Loudly, now: a weft row answered by another library measures nothing of weft.
    WRONG_LIB="nccl-library=${LIBV[$key]}"
    echo "######## FAIL: $mode $t ran on nccl-library=${LIBV[$key]}, not weft (22800); the remaining weft rows are not run" | tee -a "$log" "$PRE"
  elif [ "$lib" = weft ] && [ -z "${LIBV[$key]:-}" ]; then
    echo "######## FAIL: $mode $t ended before reporting its nccl-library (exit ${RC[$key]})" | tee -a "$log" "$PRE"
  fi
  AVG[$key]=$(awk -F: '/Avg bus bandwidth/ {gsub(/ /, "", $2); print $2}' "$f" | head -1)
  # Latency at 8 B and busbw (out of place) at 2 MiB, 128 MiB and 1 GiB.
  BW[$key]=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {
      if ($1 == 8) l = $6; if ($1 == 2097152) a = $8; if ($1 == 134217728) b = $8; if ($1 == 1073741824) c = $8 }
      END {printf "%8s %7s %7s %7s", (l == "" ? "-" : l), (a == "" ? "-" : a), (b == "" ? "-" : b), (c == "" ? "-" : c)}' "$f")
}

# The GPU API tests (with the fallback set): after the PyTorch check, before the MPI rows, so
# that the round's budget never leaves them out.
AT=skip
run_api_tests() {
  local bin="$WEFT_FROM/bin/nccl_api_gpu_tests"
  [ -x "$bin" ] && [ -n "$WEFTLIB" ] || return 0
  if [ -n "${LOADER_BAD[api]:-}" ]; then AT=loader; return 0; fi
  if ! have_time; then AT=time; return 0; fi
  echo "######## nccl_api_gpu_tests" >>"$ALOG"
  # The tests refuse to run unless weft's library answers (WEFT_NCCL_EXPECT_LIB); each test
  # has its own 30 s watchdog, and weft's waits end within WEFT_TIMEOUT.
  # On one GPU without the fallback: the real NCCL behind it refuses two ranks on one GPU
  # ("Duplicate GPU detected"), so every communicator would fail at its creation; the fp8
  # test then checks weft's refusal instead of the forwarded reduction.
  local fallback=${REALNCCL:-}
  [ "$SHARED" = 1 ] && fallback=""
  timeout -k 5 90 env LD_LIBRARY_PATH="$WEFTLIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" WEFT_NCCL_FALLBACK="$fallback" \
    WEFT_TIMEOUT=10 WEFT_NCCL_TEST_WATCHDOG_S=30 "$bin" >>"$ALOG" 2>&1
  AT=$?
}

for mode in t2 mpi; do
  for t in $TESTS; do
    run_nt weft $mode $t
    run_nt nccl $mode $t
  done
  # The PyTorch check sits between the two modes: it matters more than NCCL's mpirun tables.
  if [ "$mode" = t2 ]; then
    TW=skip; TN=skip; TC=skip
    # One GPU: NCCL refuses two ranks on it, so there is no NCCL run to compare with; the
    # PyTorch check still compares weft's DDP steps with the same training on the host.
    [ "$SHARED" = 1 ] && TN=shared && TC=shared
    if [ "$HAVE_TORCH" = 1 ] && [ -n "$WEFTLIB" ] && have_time; then
      echo "######## torch_check on weft" >>"$ALOG"
      # weft in NCCL's place: first on the library path, and preloaded, because PyTorch may
      # itself open its wheel's libnccl.so.2 by full path before libtorch_cuda.so asks for
      # libnccl.so.2 by soname (the soname then matches whichever was loaded first).
      # torch_check.py --expect-weft fails unless weft answers libtorch_cuda.so's calls.
      timeout -k 10 100 env LD_LIBRARY_PATH="$WEFTLIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$WEFTSO" \
        PYTHONUNBUFFERED=1 "$PY" "$HERE/torch_check.py" "$OUT/torch_weft.json" --expect-weft >>"$ALOG" 2>&1
      TW=$?
    fi
    if [ "$HAVE_TORCH" = 1 ] && [ "$SHARED" = 0 ] && have_time; then
      echo "######## torch_check on NCCL" >>"$ALOG"
      PYTHONUNBUFFERED=1 timeout -k 10 100 "$PY" "$HERE/torch_check.py" "$OUT/torch_nccl.json" --expect-nccl >>"$ALOG" 2>&1
      TN=$?
    fi
    if [ "$SHARED" = 0 ] && [ -f "$OUT/torch_weft.json" ] && [ -f "$OUT/torch_nccl.json" ]; then
      "$PY" "$HERE/torch_compare.py" "$OUT/torch_weft.json" "$OUT/torch_nccl.json" >>"$ALOG" 2>&1
      TC=$?
    fi
    run_api_tests
  fi
done

# ---- summary -------------------------------------------------------------------------
verdict() {  # weft's row: exit 0, every size present, #wrong 0, weft's library loaded
  local k=$1
  case "${RC[$k]:-skip}" in
    skip) echo SKIP; return;; time) echo "NOT-RUN(time)"; return;;
    shared) echo "SKIP(NCCL refuses 2 ranks on 1 GPU)"; return;;
    onegpu) echo "SKIP(-t 2 on 1 GPU: nccl-tests' cudaDeviceSynchronize waits for the other thread's kernel)"; return;;
    noshim) echo "FAIL(no device-sharing preload for -t 2)"; return;;
    loader) local m=${k#*.}; echo "FAIL(loader picks ${LOADER_BAD[${m%%.*}]})"; return;;
    notweft) echo "FAIL(not run: an earlier weft row ran on $WRONG_LIB)"; return;;
  esac
  if [ "${RC[$k]}" = 0 ] && [ "${ROWS[$k]:-0}" -ge 10 ] && [ "${WRONG[$k]:-1}" = 0 ]; then echo PASS; else echo FAIL; fi
}
FAILS=0
SKIPS=0
{
  [ "$SHARED" = 1 ] && echo "== ONE GPU: 2 ranks share it, $SHARENOTE; NCCL's rows skipped (NCCL refuses 2 ranks on 1 GPU)"
  echo "== nccl-tests ($NT_ARGS): 8 B latency (us), busbw out of place (GB/s) at 2 MiB / 128 MiB / 1 GiB"
  printf "%-15s %-4s %-5s %4s %4s %6s %8s %7s %7s %7s %8s  %s\n" test mode lib rc rows wrong "lat8B" "bw2M" "bw128M" "bw1G" avgbw verdict
  for mode in t2 mpi; do
    for t in $TESTS; do
      for lib in weft nccl; do
        k=$lib.$mode.$t
        v=$(verdict "$k")
        if [ "$lib" = weft ]; then
          [ "$v" = PASS ] && [ "${LIBV[$k]:-}" != 22800 ] && v="FAIL(library ${LIBV[$k]:-?} is not weft)"
          # The -t 2 rows that one GPU cannot run are no gap of weft's: the mpi rows cover them.
          case "$v" in PASS|"SKIP(-t 2 on 1 GPU"*) ;; SKIP*|NOT-RUN*) SKIPS=$((SKIPS + 1));; *) FAILS=$((FAILS + 1));; esac
          [ "$SHARED" = 1 ] && [ -n "${ROWS[$k]:-}" ] && v="$v [$SHARENOTE]"
        else
          [ "$v" = FAIL ] && v="FAIL(NCCL)"
        fi
        rc=${RC[$k]:-skip}; [ "$rc" = shared ] && rc=-
        printf "%-15s %-4s %-5s %4s %4s %6s %s %8s  %s\n" "$t" "$mode" "$lib" "$rc" "${ROWS[$k]:--}" \
          "${WRONG[$k]:--}" "${BW[$k]:-       -       -       -       -}" "${AVG[$k]:--}" "$v"
      done
    done
  done
  if [ "$SHARED" = 1 ]; then
    echo "== PyTorch (torch_check.py, 2 ranks on 1 GPU, $SHARENOTE): weft exit $TW (0 = pass); NCCL and the comparison skipped (NCCL refuses 2 ranks on 1 GPU; DDP checked against the host instead)"
  else
    echo "== PyTorch (torch_check.py): weft exit $TW, NCCL exit $TN, compare exit $TC (0 = pass/agree)"
  fi
  grep -h "^torch_check\|^torch_compare\|  FAIL\|  DIFF\|^  rank [0-9]*: " "$ALOG" 2>/dev/null | head -20
  [ "$TW" = 0 ] && { [ "$TC" = 0 ] || [ "$TC" = shared ]; } || FAILS=$((FAILS + 1))
  case "$AT" in
    124|137) echo "== nccl_api_gpu_tests: exit $AT: HUNG (ended by a test's watchdog or the round's timeout)";;
    loader) echo "== nccl_api_gpu_tests: FAIL: the loader would not load weft's library for it";;
    time) echo "== nccl_api_gpu_tests: NOT RUN (the round's time budget was spent)";;
    *) echo "== nccl_api_gpu_tests: exit $AT";;
  esac
  grep -h "PASSED\|FAILED\|HUNG\|tests ran\|^nccl_api_gpu_tests:" "$ALOG" 2>/dev/null | sort -u | tail -12
  case "$AT" in 0|skip|77) ;; time) SKIPS=$((SKIPS + 1));; *) FAILS=$((FAILS + 1));; esac
  if [ ${#MISSING[@]} -gt 0 ]; then for m in "${MISSING[@]}"; do echo "missing: $m"; done; fi
  echo "elapsed: $(elapsed) s; logs: $OUT (prereq.log, nccltests_weft.log, nccltests_nccl.log, api_tests.log, torch_*.json)"
  ONGPU=""; [ "$SHARED" = 1 ] && ONGPU=" (2 ranks on 1 GPU: $SHARENOTE)"
  if [ "$FAILS" != 0 ]; then echo "OVERALL: FAIL ($FAILS failing items, $SKIPS weft rows not run)$ONGPU"
  elif [ "$SKIPS" != 0 ]; then echo "OVERALL: INCOMPLETE (no failure; $SKIPS weft rows not run: see missing)$ONGPU"
  else echo "OVERALL: PASS$ONGPU"; fi
} >"$TMP/summary.txt"   # not a pipe: FAILS must survive into the exit status
tee -a "$SUM" <"$TMP/summary.txt"
rm -rf "$TMP"
[ "$FAILS" = 0 ]
