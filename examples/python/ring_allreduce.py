"""Ring AllReduce in GC3's chunk DSL, on weft: a ring ReduceScatter leaves chunk c fully
reduced on rank c, then a ring AllGather passes every reduced chunk around. The same
algorithm as algorithms/ring_allreduce.rccl and dsl:ring_allreduce, transfer for transfer.

    python3 examples/python/ring_allreduce.py             # 8 ranks: verify, compile, simulate
    weft compile examples/python/ring_allreduce.py -t a100-2x4
"""
import weft
from weft.language import *
from weft.language.collectives import AllReduce


def ring_allreduce(size, instances=None):
    with MSCCLProgram("ring_allreduce", None, AllReduce(size, size, True), instances) as prog:
        # ReduceScatter: chunk c starts on rank c+1 and picks up every rank's share on its way to rank c.
        partial = [chunk((c + 1) % size, Buffer.output, c) for c in range(size)]
        for step in range(size - 1):
            for r in range(size):
                c = (r - step - 1) % size
                partial[c] = chunk((r + 1) % size, Buffer.output, c).reduce(partial[c])
        # AllGather: the reduced chunk travels on around the ring.
        for step in range(size - 1):
            for r in range(size):
                c = (r - step) % size
                partial[c] = partial[c].copy((r + 1) % size, Buffer.output, c)
    return prog


if __name__ == "__main__":
    prog = ring_allreduce(param("nRanks", 8))
    if not run_by_command():  # run by hand: verify and simulate here
        print(weft.verify(prog).ok and "verified" or "WRONG")
        reports = weft.simulate(prog, "a100-2x4", sizes="1M:64M:8")
        print(reports.table())
