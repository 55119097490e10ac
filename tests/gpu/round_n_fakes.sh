# Fakes for tests/gpu/round_n_dryrun.sh (sourced; $CC compiles): make_fakes DIR ROOT writes, under DIR,
#   fakebin/   nvidia-smi (FAKE_NGPU GPUs), mpirun (runs the program once, as rank 0), mpicc
#              (--showme:incdirs/libdirs), nvcc (--version), make (compiles the fake test
#              program for every target named, linked against NCCL_HOME/lib/libnccl.so)
#   nccl/      the "machine's NCCL": a real shared library, soname libnccl.so.2, whose
#              ncclGetVersion answers 22809, with include/nccl.h
#   bundle/ and base/   bundles as scripts/make_gpu_bundle.sh lays them out: bin/weft (a
#              script: `bench` is fake_bench.py, base 10% slower), bin/weft_gpu_tests
#              (FAKE_GATE_FAIL=1 fails `collectives`), lib/libweft_nccl.so (a real shared
#              library, soname libnccl.so.2, answering 22800, or FAKE_WEFT_ANSWER), a fake
#              part round and PyTorch check, nccl-tests-src/ (files only: the fake make
#              reads none of them), the round's scripts from this checkout.
# The fake nccl-tests program links libnccl.so.2 for real, so the round's ldd checks and its
# check of the answering library (nccl-library=) run as on the GPU machine. It prints
# nccl-tests' rows: weft 4 us + size / 400 MB/s, NCCL 8 us + size / 300 MB/s, half in a graph
# (-G); FAKE_NT_HANG=TEST hangs that test on weft in a graph after 3 rows.
# shellcheck shell=bash disable=SC2016  # the fakes' scripts expand their own arguments

make_fakes() {
  local D=$1 ROOT=$2 b
  mkdir -p "$D/fakebin" "$D/nccl/lib" "$D/nccl/include" "$D/mpi/include" "$D/mpi/lib" "$D/src"
  cat >"$D/src/fake_lib.c" <<'EOF'
#include <stdlib.h>
int ncclGetVersion(int* v) {
#ifdef ANSWER_ENV
  const char* o = getenv(ANSWER_ENV);
  if (o) { *v = atoi(o); return 0; }
#endif
  *v = VERSION;
  return 0;
}
EOF
  cat >"$D/src/fake_nt.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int ncclGetVersion(int*);
static long parse(const char* s) {
  char* end; long v = strtol(s, &end, 10);
  if (*end == 'K') v <<= 10; else if (*end == 'M') v <<= 20; else if (*end == 'G') v <<= 30;
  return v;
}
int main(int argc, char** argv) {
  long b = 32L << 20, e = 32L << 20, f = 2; int graph = 0, rows = 0, v = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!strcmp(argv[i], "-b")) b = parse(argv[++i]);
    else if (!strcmp(argv[i], "-e")) e = parse(argv[++i]);
    else if (!strcmp(argv[i], "-f")) f = parse(argv[++i]);
    else if (!strcmp(argv[i], "-G")) graph = atoi(argv[++i]) > 0;
  }
  ncclGetVersion(&v);
  const char* name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  const char* hang = getenv("FAKE_NT_HANG");
  int weft = v == 22800;
  printf("# nccl-tests version 2.19.6 nccl-headers=22700 nccl-library=%d\n# Collective test starting: %s\n#\n", v, name);
  printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
  for (long s = b; s <= e; s *= f) {
    double us = weft ? 4.0 + s / 400e3 : 8.0 + s / 300e3;
    if (graph) us /= 2;
    double bw = s / us / 1e3;
    printf("%12ld  %12ld  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6d  %7.2f  %6.2f  %6.2f  %6d\n",
           s, s / 4, "float", "sum", -1, us, bw, bw, 0, us, bw, bw, 0);
    fflush(stdout);
    if (hang && weft && graph && !strncmp(name, hang, strlen(hang)) && ++rows == 3) sleep(600);
  }
  printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  return 0;
}
EOF
  "$CC" -shared -fPIC -O1 -DVERSION=22809 -Wl,-soname,libnccl.so.2 -o "$D/nccl/lib/libnccl.so.2.28.9" "$D/src/fake_lib.c" || return 1
  ln -s libnccl.so.2.28.9 "$D/nccl/lib/libnccl.so.2"
  printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n' >"$D/nccl/include/nccl.h"
  : >"$D/mpi/include/mpi.h"; : >"$D/mpi/lib/libmpi.so"

  cat >"$D/fakebin/nvidia-smi" <<'EOF'
#!/bin/bash
n=${FAKE_NGPU:-4}
case "$*" in
  -L) for i in $(seq 0 $((n - 1))); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-fake-$i)"; done ;;
  *--query-gpu=name,driver*) for i in $(seq $n); do echo "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB"; done ;;
  *--query-gpu=name*) for i in $(seq $n); do echo "NVIDIA H100 80GB HBM3"; done ;;
  *--query-gpu=driver*) for i in $(seq $n); do echo "580.159.04"; done ;;
  "topo -m") printf '\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n' ;;
  *) echo "fake nvidia-smi: $*" ;;
esac
EOF
  cat >"$D/fakebin/mpirun" <<'EOF'
#!/bin/bash
[ "${1:-}" = --version ] && { echo "mpirun (Open MPI) 4.1.6"; exit 0; }
while [ $# -gt 0 ]; do
  case $1 in
    -np|-x|--bind-to) shift 2 ;;
    --mca) shift 3 ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
EOF
  cat >"$D/fakebin/mpicc" <<EOF
#!/bin/bash
case "\$1" in --showme:incdirs) echo "$D/mpi/include" ;; --showme:libdirs) echo "$D/mpi/lib" ;; esac
EOF
  cat >"$D/fakebin/nvcc" <<'EOF'
#!/bin/bash
echo "Cuda compilation tools, release 13.0, V13.0.fake"
EOF
  cat >"$D/fakebin/make" <<EOF
#!/bin/bash
home=""; targets=(); skip=0
for a in "\$@"; do
  if [ \$skip = 1 ]; then skip=0; continue; fi
  case \$a in -C|-j) skip=1 ;; NCCL_HOME=*) home=\${a#NCCL_HOME=} ;; *=*) ;; /*) targets+=("\$a") ;; esac
done
for t in "\${targets[@]}"; do
  echo "Compiling  \$(basename "\$t")"
  "\$CC" -O1 -o "\$t" "$D/src/fake_nt.c" -L"\$home/lib" -lnccl || exit 2
done
EOF
  chmod +x "$D"/fakebin/*

  for b in bundle base; do make_fake_bundle "$D" "$ROOT" "$D/$b" "$b" || return 1; done
}

# make_fake_bundle D ROOT DIR NAME
make_fake_bundle() {
  local D=$1 ROOT=$2 B=$3 name=$4
  mkdir -p "$B/bin" "$B/lib" "$B/include/weft" "$B/share/weft" "$B/torch" "$B/nccl-tests-src/src"
  cp "$ROOT/tests/gpu/run_round_n.sh" "$ROOT/tests/gpu/round_nccltests.sh" "$ROOT/scripts/round_n_tables.py" \
     "$ROOT/scripts/tuned_rows.py" "$B/"
  cp "$ROOT/include/weft/nccl.h" "$B/include/weft/"
  echo "fake Makefile: the fake make reads none of this" >"$B/nccl-tests-src/src/Makefile"
  echo "// fake" >"$B/nccl-tests-src/src/all_reduce.cu"; echo "// fake" >"$B/nccl-tests-src/src/common.h"
  printf 'made: fake\ncommit: %s\n' "fake-$name" >"$B/BUNDLE_INFO"
  "$CC" -shared -fPIC -O1 -DVERSION=22800 -DANSWER_ENV='"FAKE_WEFT_ANSWER"' -Wl,-soname,libnccl.so.2 \
    -o "$B/lib/libweft_nccl.so" "$D/src/fake_lib.c" || return 1
  cat >"$B/bin/weft" <<EOF
#!/bin/bash
if [ "\${1:-}" = bench ] && [ "\${2:-}" = --help ]; then
  echo "  --no-check  skip the #wrong check"; [ "$name" = bundle ] && echo "  --no-sim  leave out the simulator"; exit 0
fi
if [ "\${1:-}" = tune ]; then  # a table as \`weft tune -o\` writes it: a tuned row, then a default one
  o=""; while [ \$# -gt 0 ]; do [ "\$1" = -o ] && o=\$2; shift; done
  printf '{"format":"weft-selection","version":1,"description":"Written by weft tune (fake). The tuned rows come first; the rest follow.","rows":[\n' >"\$o"
  printf '{"collectives":["AllReduce"],"ranks":[2,2],"bytes":[0,null],"placement":"out","algorithm":"ring","protocol":"Simple","instances":8,"note":"weft tune, measured (fake)"},\n' >>"\$o"
  printf '{"collectives":["AllReduce"],"algorithm":"ring","protocol":"Simple","instances":8,"note":"weft'"'"'s default table (calls the tuned rows do not cover)"}]}\n' >>"\$o"
  echo "# weft tune: measured on fake GPU"; exit 0
fi
[ "\${1:-}" = bench ] || { echo "fake weft: only bench and tune"; exit 2; }
shift; exec python3 "$D/fake_bench.py" "$name" "\$@"
EOF
  cat >"$B/bin/weft_gpu_tests" <<'EOF'
#!/bin/bash
echo "fake weft_gpu_tests $* (selection: ${WEFT_SELECTION:-built-in})"
if [ "$1" = collectives ] && [ -n "${FAKE_GATE_FAIL:-}" ]; then echo "FAIL AllReduce float32 sum count 7: element 3 is 5, want 6"; exit 1; fi
echo "rank 0: 123 cases, 0 failures, 1.0 s"
EOF
  printf '#!/bin/bash\necho fake part_bench "$@"\n' >"$B/bin/part_bench"
  printf '#!/bin/bash\n"$1/bin/part_bench" goodput >"$2"\necho "part round written to $2"\n' >"$B/part_round.sh"
  cat >"$B/torch/torch_check.py" <<'EOF'
import json, sys
json.dump({"fake": sys.argv[2]}, open(sys.argv[1], "w"))
print("torch_check: 150 of 150 checks pass (fake)")
EOF
  printf 'print("torch_compare: agree (fake)")\n' >"$B/torch/torch_compare.py"
  chmod +x "$B"/bin/* "$B"/*.sh
  [ -f "$D/fake_bench.py" ] || cat >"$D/fake_bench.py" <<'EOF'
import os, sys, time
bundle, a = sys.argv[1], sys.argv[2:]
colls, opts, i = [], {}, 0
while i < len(a):
    if a[i] in ("--sizes", "--factor", "--csv", "--iters", "--warmup"):
        opts[a[i]] = a[i + 1]; i += 2
    elif a[i].startswith("--"):
        opts[a[i]] = True; i += 1
    else:
        colls.append(a[i]); i += 1
def parse(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)
lo, hi = (parse(x) for x in opts["--sizes"].split(":"))
f = float(opts.get("--factor", 2)); graph = "--graph" in opts; nccl = "--no-nccl" not in opts
algo = os.environ.get("WEFT_ALGO", "")
hang = algo == "ring_allreduce"   # the dry run's hanging step
rows = []
for c in colls:
    print("#\n# %s  float32 sum  4 ranks  NVIDIA H100  %s  warmup 5, iters 20%s" % (c, "NCCL 22809" if nccl else "no NCCL", ", CUDA graph" if graph else ""))
    b = float(lo)
    while b <= hi * 1.0000001:
        size = int(b); b *= f
        wus = (3.0 + size / 200e3) * (1.1 if bundle == "base" else 1.0) * (0.5 if graph else 1.0)
        nus = 6.0 + size / 300e3
        wa, na = size / wus / 1e3, size / nus / 1e3
        side_n = "%10.2f %8.2f %8.2f %6d %4d" % (nus, na, na, 0, 24) if nccl else "  ----------        -        -      -    -"
        print(" %11d %12d %8s | %10.2f %8.2f %8.2f %6d %4d | %s |         -      - |       -  plan" % (size, size // 4, "float32", wus, wa, wa, 0, 8, side_n))
        sys.stdout.flush()
        rows.append((c, size, wus, wa, nus if nccl else 0, na if nccl else 0, 0 if nccl else -1))
        if hang and len(rows) == 2:
            time.sleep(600)
if "--csv" in opts:
    with open(opts["--csv"], "w") as out:
        out.write("collective,bytes,count,type,weft_us,weft_algbw,weft_busbw,weft_wrong,weft_tbs,nccl_us,nccl_algbw,nccl_busbw,nccl_wrong,nccl_tbs,weft_plan,sim_us,sim_err_pct\n")
        for c, size, wus, wa, nus, na, nw in rows:
            out.write("%s,%d,%d,float32,%g,%g,%g,0,8,%g,%g,%g,%d,24,plan,,\n" % (c, size, size // 4, wus, wa, wa, nus, na, na, nw))
EOF
}
