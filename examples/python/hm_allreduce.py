"""HM AllReduce (paper 001, App. A; algorithms/hm_allreduce.rccl) in GC3's chunk DSL: an
intra-node ReduceScatter over the NVLink mesh, an inter-node ReduceScatter and AllGather over
the rings of equal local index, and an intra-node AllGather, the last two pipelined. The same
transfers at the same steps as the C++ twin dsl:hm_allreduce.

    python3 examples/python/hm_allreduce.py
    weft simulate examples/python/hm_allreduce.py -t a100-4x8 --size 256M
"""
import weft
from weft.language import *
from weft.language.collectives import AllReduce


def hm_allreduce(size, gpus_per_node, instances=None):
    n, G = size, gpus_per_node
    if n % G:
        raise Error("hm_allreduce: %d ranks are not whole nodes of %d GPUs" % (n, G))
    nodes = n // G
    with MSCCLProgram("hm_allreduce", None, AllReduce(n, n, True), instances, gpus_per_node=G) as prog:
        # 1. Intra-node ReduceScatter: local GPU i owns chunks i + G*x.
        for offset in range(G - 1):
            for r in range(n):
                peer = (r // G) * G + (r % G + offset + 1) % G
                for x in range(nodes):
                    c = peer % G + x * G
                    chunk(peer, Buffer.output, c).reduce(chunk(r, Buffer.output, c))
        # 2. Inter-node ReduceScatter on the ring of equal local index (r -> r+G).
        for b in range(nodes - 1):
            for r in range(n):
                c = (r - b * G) % n
                chunk((r + G) % n, Buffer.output, c).reduce(chunk(r, Buffer.output, c))
        # 3. and 4.: pass the newest reduced chunk on around the ring and to the local peers.
        for b in range(nodes):
            if b + 1 < nodes:
                for r in range(n):
                    c = (r + G - b * G) % n
                    chunk(r, Buffer.output, c).copy((r + G) % n, Buffer.output, c)
            for r in range(n):
                c = (r + G - b * G) % n
                mine = chunk(r, Buffer.output, c)
                for offset in range(G - 1):
                    mine.copy((r // G) * G + (r % G + offset + 1) % G, Buffer.output, c)
    return prog


if __name__ == "__main__":
    prog = hm_allreduce(param("nRanks", 16), param("GPUPerNode", 8))
    if not run_by_command():
        print("verified" if weft.verify(prog) else "WRONG")
        print(weft.simulate(prog, "a100-2x8", sizes="1M:256M:16").table())
