"""Times the import and compile of a ring AllReduce from Python against the same from C++
(issue 18's target: within 1.5x at 1,024 ranks; docs/python.md gives the figures).

    PYTHONPATH=build/python python3 python/compile_time.py [--topology a100-128x8] [--weft build/bin/weft]

Python: `import weft`, trace examples/python/ring_allreduce.py for the topology's GPUs, then
weft.compile (verify + compile, hpds). C++: `weft compile dsl:ring_allreduce` (the same
algorithm from src/lang/chunk_dsl_algorithms.cpp, verify + compile), its own wall time.
The two run one after the other, each in a fresh process, twice; the best of each counts."""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PY_RUN = r"""
import sys, time
t0 = time.perf_counter()
import weft
sys.path.insert(0, %(examples)r)
from ring_allreduce import ring_allreduce
topo = weft.topology(%(topo)r)
t1 = time.perf_counter()
prog = ring_allreduce(topo.num_gpus)
t2 = time.perf_counter()
plan = weft.compile(prog, topo)
t3 = time.perf_counter()
s = plan.summary()
print("%%.3f %%.3f %%.3f %%.3f %%d" %% (t3 - t0, t1 - t0, t2 - t1, t3 - t2, s["tasks"]))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="a100-128x8")
    ap.add_argument("--weft", default=os.path.join(ROOT, "build", "bin", "weft"))
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    code = PY_RUN % {"examples": os.path.join(ROOT, "examples", "python"), "topo": a.topology}
    best_py, best_cpp = None, None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        wall = time.perf_counter() - t0  # the whole process, start and exit included, as for C++
        total, imp, trace, comp, tasks = float(out[0]), float(out[1]), float(out[2]), float(out[3]), int(out[4])
        print("python: %.2f s process (import %.2f, trace %.2f, verify+compile %.2f), %d tasks"
              % (wall, imp, trace, comp, tasks))
        best_py = wall if best_py is None else min(best_py, wall)
        t0 = time.perf_counter()
        subprocess.run([a.weft, "compile", "dsl:ring_allreduce", "-t", a.topology], check=True, capture_output=True)
        cpp = time.perf_counter() - t0
        print("c++:    %.2f s process (weft compile dsl:ring_allreduce)" % cpp)
        best_cpp = cpp if best_cpp is None else min(best_cpp, cpp)
    print("ratio python / c++: %.2f (best of %d each)" % (best_py / best_cpp, a.repeat))


if __name__ == "__main__":
    main()
