"""All-pairs AllReduce (paper 004 §7.2; algorithms/allpairs_allreduce.rccl): every rank sends
chunk q to rank q's scratch, q reduces the shares, then sends its chunk to everyone. Two
steps of communication on any number of ranks; the twin of dsl:allpairs_allreduce.

    python3 examples/python/allpairs_allreduce.py
"""
import weft
from weft.language import *
from weft.language.collectives import AllReduce


def allpairs_allreduce(size, instances=None):
    n = size
    with MSCCLProgram("allpairs_allreduce", None, AllReduce(n, n, True), instances, gpus_per_node=n) as prog:
        # Rank r's share of chunk q lands in scratch chunk r of rank q.
        for r in range(n):
            for d in range(1, n):
                q = (r + d) % n
                chunk(r, Buffer.output, q).copy(q, Buffer.scratch, r)
        # Rank q adds the shares into its chunk q, one local reduction at a time.
        total = []
        for q in range(n):
            acc = chunk(q, Buffer.output, q)
            for j in range(1, n):
                acc = acc.reduce(chunk(q, Buffer.scratch, (q + j) % n))
            total.append(acc)
        # Every rank sends its reduced chunk straight to every other rank.
        for r in range(n):
            for d in range(1, n):
                total[r].copy((r + d) % n, Buffer.output, r)
    return prog


if __name__ == "__main__":
    prog = allpairs_allreduce(param("nRanks", 8))
    if not run_by_command():
        print("verified" if weft.verify(prog) else "WRONG")
        print(weft.simulate(prog, "h200-1x8", sizes="64K:16M:16").table())
