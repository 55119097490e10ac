# nccl-tests for tests/gpu/run_round_n.sh (sourced, not run): finds the machine's NCCL and
# Open MPI, builds NVIDIA's nccl-tests from the carried source on the device, and runs one
# collective on one library (weft's libnccl.so.2 or the machine's NCCL) with `mpirun -np N`.
# Reads from the round: B (bundle), N, TMP, OUT, NTB (build folder), ORIG_LD, say, note, step.
# shellcheck shell=bash disable=SC2034,SC2015,SC2086,SC2206,SC2054
# (SC2034: the variables set here are read by run_round_n.sh; SC2086/SC2206: argument lists
# are split on purpose; SC2054: "self,tcp" is one argument)

NT_TESTS=${NT_TESTS:-"all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"}  # the seven, unless the caller names fewer
WEFT_NCCL_VERSION=22800   # what weft's ncclGetVersion answers (docs/nccl-compat.md)

# The machine's NCCL (not weft's): REALNCCL (file, links resolved), REALNCCL_VER ("2.28.9" or
# "?"), REALNCCL_H (its nccl.h or ""). Looks at $NCCL_LIB, PyTorch's nvidia-nccl wheel
# (PY's site-packages), torch/lib, ldconfig, /usr/local/cuda.
nt_find_real_nccl() {
  local cands=() p d
  [ -n "${NCCL_LIB:-}" ] && cands+=("$NCCL_LIB")
  for d in /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages; do
    cands+=("$d/nvidia/nccl/lib/libnccl.so.2" "$d/nvidia/cu13/lib/libnccl.so.2" "$d/torch/lib/libnccl.so.2")
  done
  if [ -n "${PY:-}" ]; then
    p=$(timeout 30 "$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$p" ] && cands+=("$p")
  fi
  p=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}'); [ -n "$p" ] && cands+=("$p")
  cands+=(/usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2)
  REALNCCL=""; REALNCCL_VER="?"; REALNCCL_H=""
  for p in "${cands[@]}"; do
    [ -f "$p" ] || continue
    p=$(readlink -f "$p")
    cmp -s "$p" "$B/lib/libweft_nccl.so" && continue          # weft's own library under NCCL's name
    if command -v nm >/dev/null 2>&1 && ! nm -D --defined-only "$p" 2>/dev/null | grep -q ' ncclGetVersion$'; then continue; fi
    REALNCCL=$p; break
  done
  [ -n "$REALNCCL" ] || return 0
  case $(basename "$REALNCCL") in libnccl.so.2.*) REALNCCL_VER=${REALNCCL##*/libnccl.so.} ;; esac
  for d in "$(dirname "$REALNCCL")/../include" /usr/include /usr/local/cuda/include; do
    [ -f "$d/nccl.h" ] && REALNCCL_H=$(readlink -f "$d/nccl.h") && break
  done
  if [ "$REALNCCL_VER" = "?" ] && [ -n "$REALNCCL_H" ]; then
    REALNCCL_VER=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END {print v}' "$REALNCCL_H")
  fi
}

# Open MPI: MPIRUN, MPIINC (holds mpi.h), MPILIB (holds libmpi.so), MPIARGS. Empty MPIRUN:
# none found (the round then builds the plain tests and runs one process of N threads).
nt_find_mpi() {
  local m p
  MPIRUN=""; MPIINC=""; MPILIB=""; MPIARGS=()
  for m in mpirun /usr/bin/mpirun /usr/local/mpi/bin/mpirun /opt/hpcx/ompi/bin/mpirun; do
    p=$(command -v "$m" 2>/dev/null || true); [ -n "$p" ] && MPIRUN=$p && break
  done
  [ -n "$MPIRUN" ] || return 0
  if command -v mpicc >/dev/null 2>&1; then
    for p in $(mpicc --showme:incdirs 2>/dev/null); do [ -f "$p/mpi.h" ] && MPIINC=$p && break; done
    for p in $(mpicc --showme:libdirs 2>/dev/null); do [ -e "$p/libmpi.so" ] && MPILIB=$p && break; done
  fi
  for p in /usr/lib/x86_64-linux-gnu/openmpi/include /usr/include/openmpi /usr/include/x86_64-linux-gnu/openmpi; do
    [ -z "$MPIINC" ] && [ -f "$p/mpi.h" ] && MPIINC=$p
  done
  for p in /usr/lib/x86_64-linux-gnu/openmpi/lib /usr/lib/x86_64-linux-gnu /usr/lib64/openmpi/lib; do
    [ -z "$MPILIB" ] && [ -e "$p/libmpi.so" ] && MPILIB=$p
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Only the tests' bootstrap travels over MPI: TCP is enough, and avoids shared-memory
  # transports that containers sometimes refuse.
  MPIARGS=(--allow-run-as-root --bind-to none --mca btl self,tcp --mca pml ob1 --mca coll ^hcoll
           -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS
           -x WEFT_DATA_DIR -x WEFT_TIMEOUT -x WEFT_LOG_LEVEL)
}

# nt_build SRC DEST SECONDS: builds the seven tests from nccl-tests' source into DEST (sm_90
# only, DSO=1) against weft's nccl.h declared 2.27 (docs/nccl-compat.md: nccl-tests 2.19 takes
# the 2.28 device API otherwise, which weft does not have) and weft's library, so that the
# same binaries run on both libraries. NT_HEADER=machine builds against the machine's nccl.h
# and NCCL instead. With MPI (mpi.h and libmpi.so found) the binaries are <test>_perf_mpi,
# else <test>_perf. A finished build leaves DEST/BUILT (its inputs' digest): a later call on
# the same machine reuses it.
nt_build() {
  local src=$1 dest=$2 secs=$3 nvcc cuda home="$TMP/nt-home" digest targets="" t suffix="" mpi=()
  nvcc=$(command -v nvcc 2>/dev/null || true); [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  [ -n "$nvcc" ] || { echo "nt_build: no nvcc (PATH, /usr/local/cuda/bin)"; return 3; }
  cuda=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
  [ -f "$src/src/Makefile" ] || { echo "nt_build: $src is not nccl-tests' source (no src/Makefile)"; return 3; }
  rm -rf "$home"; mkdir -p "$home/include" "$home/lib"
  if [ "${NT_HEADER:-weft}" = machine ]; then
    [ -n "$REALNCCL_H" ] && [ -n "$REALNCCL" ] || { echo "nt_build: NT_HEADER=machine but no nccl.h beside $REALNCCL"; return 3; }
    ln -s "$REALNCCL_H" "$home/include/nccl.h"; ln -s "$REALNCCL" "$home/lib/libnccl.so"
  else
    [ -f "$B/include/weft/nccl.h" ] && [ -f "$B/lib/libweft_nccl.so" ] ||
      { echo "nt_build: the bundle lacks include/weft/nccl.h or lib/libweft_nccl.so (make it with scripts/make_gpu_bundle.sh)"; return 3; }
    printf '#define WEFT_NCCL_DECLARED_MINOR 27\n#include "%s"\n' "$B/include/weft/nccl.h" >"$home/include/nccl.h"
    ln -s "$B/lib/libweft_nccl.so" "$home/lib/libnccl.so"
  fi
  if [ -n "$MPIRUN" ] && [ -n "$MPIINC" ] && [ -n "$MPILIB" ]; then
    mkdir -p "$home/mpi"; ln -s "$MPIINC" "$home/mpi/include"; ln -s "$MPILIB" "$home/mpi/lib"
    suffix=_mpi; mpi=(MPI=1 "MPI_HOME=$home/mpi" NAME_SUFFIX=_mpi)
  fi
  for t in $NT_TESTS; do targets="$targets $dest/${t}_perf$suffix"; done
  digest=$( { cat "$src"/src/*.cu "$src"/src/*.h "$src"/src/Makefile "$home/include/nccl.h"; cat "$(readlink -f "$home/include/nccl.h")"
              [ "${NT_HEADER:-weft}" = weft ] && cat "$B/include/weft/nccl.h"; echo "$suffix ${NT_HEADER:-weft}"; } |
            md5sum | cut -c1-32)
  if [ -f "$dest/BUILT" ] && [ "$(cat "$dest/BUILT")" = "$digest" ]; then
    echo "nt_build: reusing $dest (built by an earlier call on this machine)"; return 0
  fi
  rm -rf "$dest"; mkdir -p "$dest"
  echo "nt_build: $src -> $dest with $nvcc, MPI ${MPIINC:-none}, header ${NT_HEADER:-weft}, $(nproc) cores"
  # At most 10 jobs (there are 10 files) at low priority: the GPU steps run meanwhile.
  if command -v make >/dev/null 2>&1; then
    timeout -k 5 "$secs" nice -n 10 make -C "$src/src" -j "${NT_JOBS:-10}" BUILDDIR="$dest" NCCL_HOME="$home" CUDA_HOME="$cuda" NVCC="$nvcc" \
      DSO=1 CUDARTLIB=cudart NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 "${mpi[@]}" $targets || return $?
  else
    nt_build_cmake "$src" "$dest" "$secs" "$nvcc" "$home" "$suffix" || return $?
  fi
  for t in $targets; do [ -x "$t" ] || { echo "nt_build: $t was not built"; return 4; }; done
  echo "$digest" >"$dest/BUILT"
  echo "nt_build: built$(for t in $targets; do printf ' %s' "$(basename "$t")"; done)"
}

# nt_build_cmake SRC DEST SECONDS NVCC HOME SUFFIX: the same with nccl-tests' CMakeLists.txt
# and ninja, where the machine has no make (it compiles common.cu once per test: slower).
nt_build_cmake() {
  local src=$1 dest=$2 secs=$3 nvcc=$4 home=$5 suffix=$6 t names=""
  command -v cmake >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 || { echo "nt_build: neither make nor cmake with ninja"; return 3; }
  for t in $NT_TESTS; do names="$names ${t}_perf"; done
  timeout -k 5 "$secs" nice -n 10 cmake -S "$src" -B "$dest/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DNCCL_HOME="$home" || return $?
  timeout -k 5 "$secs" nice -n 10 ninja -C "$dest/cmake" -j "${NT_JOBS:-10}" $names || return $?
  if [ -n "$suffix" ] && ! ldd "$dest/cmake/all_reduce_perf" 2>/dev/null | grep -q libmpi; then
    echo "nt_build: CMake did not find MPI, so mpirun -np $N would start $N separate one-rank tests"; return 4
  fi
  for t in $NT_TESTS; do cp "$dest/cmake/${t}_perf" "$dest/${t}_perf$suffix" || return 4; done
}

# nt_libdir LIB: a folder whose libnccl.so.2 is weft's library (weft) or the machine's (nccl).
nt_libdir() {
  local d="$TMP/lib-$1" f
  if [ "$1" = weft ]; then f=$B/lib/libweft_nccl.so; else f=$REALNCCL; fi
  [ -n "$f" ] && [ -f "$f" ] || return 1
  mkdir -p "$d"; ln -sfn "$(readlink -f "$f")" "$d/libnccl.so.2"; echo "$d"
}

# nt_ldpath LIB: LD_LIBRARY_PATH for a test on LIB (its libnccl.so.2 first).
nt_ldpath() {
  local cuda
  cuda=$(dirname "$(readlink -f "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")/../lib64
  echo "$(nt_libdir "$1"):$NTB:$cuda${MPILIB:+:$MPILIB}${ORIG_LD:+:$ORIG_LD}"
}

# nt_resolves LIB: the file the loader picks for the tests' libnccl.so.2 on LIB's path.
nt_resolves() {
  local bin=$NTB/all_reduce_perf$NT_SUFFIX p
  p=$(env LD_LIBRARY_PATH="$(nt_ldpath "$1")" ldd "$bin" 2>/dev/null | awk '$1 == "libnccl.so.2" {print $3; exit}')
  [ -n "$p" ] && [ "$p" != not ] && readlink -f "$p" || echo nothing
}

# nt_describe LOG: one summary line for a test's output.
nt_describe() {
  awk '$1 ~ /^[0-9]+$/ && NF >= 13 { rows++; if ($9 ~ /^[0-9]+$/) w += $9; if ($13 ~ /^[0-9]+$/) w += $13 }
       /nccl-library=/ { sub(/.*nccl-library=/, ""); lib = $1 }
       /Avg bus bandwidth/ { avg = $NF }
       END { printf "rows %d, #wrong %d, nccl-library %s, avg busbw %s\n", rows, w, (lib == "" ? "?" : lib), (avg == "" ? "-" : avg) }' "$1"
}

# nt_run LIB VARIANT TEST: one nccl-tests run (step nt_LIB_TEST_VARIANT), its output appended
# to nccltests.log after "######## LIB mpiN TEST VARIANT: command".
nt_run() {
  local lib=$1 variant=$2 t=$3 name="nt_$1_$3_$2" args=$NT_ARGS limit=60 cmd ldp pol="" xpol=()
  # Variants: plain, graph (-G), r1 / r2 (buffers registered, -R 1; symmetric windows, -R 2),
  # zero (NCCL_CTA_POLICY=2 and -R 2 from 16 MiB), eff (NCCL_CTA_POLICY=1 from 64 MiB).
  case $variant in
    graph) args="$NT_ARGS $NT_GRAPH_ARGS"; limit=90 ;;
    r1) args="$NT_ARGS -R 1" ;;
    r2) args="$NT_ARGS -R 2" ;;
    zero) args="${NT_BIG_ARGS:--b 16M -e 1G -f 4 -n 20 -w 5 -c 1} -R 2"; pol=2 ;;
    eff) args="${NT_BIG_ARGS:--b 64M -e 1G -f 4 -n 20 -w 5 -c 1}"; pol=1 ;;
  esac
  [ -n "$pol" ] && xpol=(-x "NCCL_CTA_POLICY=$pol")
  ldp=$(nt_ldpath "$lib")
  if [ -n "$NT_SUFFIX" ]; then
    cmd=(env LD_LIBRARY_PATH="$ldp" ${pol:+NCCL_CTA_POLICY=$pol} "$MPIRUN" -np "$N" "${MPIARGS[@]}" "${xpol[@]}" "$NTB/${t}_perf$NT_SUFFIX" $args)
  else
    cmd=(env LD_LIBRARY_PATH="$ldp" ${pol:+NCCL_CTA_POLICY=$pol} "$NTB/${t}_perf" -t "$N" $args)
  fi
  STEP_DESC=nt_describe step "$name" "$limit" "${cmd[@]}"
  [ -f "$TMP/$name.log" ] || return 0
  { echo "######## $lib $NT_MODE $t $variant: ${cmd[*]}"; cat "$TMP/$name.log"; echo "######## exit $LAST_RC, ${LAST_DT}s"; } >>"$OUT/nccltests.log"
  if [ "$LAST_RC" != 0 ]; then
    if [ "$lib" = weft ]; then note "FAIL: $name exited $LAST_RC"; FAILS=$((FAILS + 1))
    else note "NCCL's run $name exited $LAST_RC: its rows are missing or partial"; fi
  fi
  local got; got=$(sed -n 's/.*nccl-library=\([0-9]*\).*/\1/p' "$TMP/$name.log" | head -n 1)
  if [ "$lib" = weft ] && [ "$got" != "$WEFT_NCCL_VERSION" ]; then
    if [ -n "$got" ]; then
      WEFT_ROWS="stopped: $name was answered by nccl-library=$got, not weft's $WEFT_NCCL_VERSION"
      note "FAIL: $WEFT_ROWS; no further weft row runs"
    else
      note "FAIL: $name ended before nccl-tests printed its nccl-library (exit $LAST_RC)"
    fi
    FAILS=$((FAILS + 1))
  elif [ "$lib" = nccl ] && [ "$got" = "$WEFT_NCCL_VERSION" ]; then
    note "FAIL: $name (the machine's NCCL) was answered by weft's library"; FAILS=$((FAILS + 1))
  fi
  if [ "$lib" = weft ] && [ "$(nt_describe "$TMP/$name.log" | sed 's/.*#wrong \([0-9]*\).*/\1/')" != 0 ]; then
    note "FAIL: $name has #wrong above 0"; FAILS=$((FAILS + 1))
  fi
}
