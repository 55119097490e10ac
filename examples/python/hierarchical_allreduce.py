"""Hierarchical AllReduce as paper 004 §2 writes it (GC3's introductory example): four ring
phases built from two helpers. With N nodes of G GPUs and N*G chunks per rank:
  1. intra-node ReduceScatter: local GPU g of every node ends with block g (N chunks) summed
     over its node;
  2. inter-node ReduceScatter over the GPUs of equal local index: node k's GPU g ends with
     chunk g*N + k summed over all ranks;
  3. inter-node AllGather of those chunks, 4. intra-node AllGather of the blocks.
Each ring moves groups of chunks as one reference (chunk(..., size)), as GC3 does.

    python3 examples/python/hierarchical_allreduce.py
"""
import weft
from weft.language import *
from weft.language.collectives import AllReduce


def reduce_scatter(ranks, offset, size):
    """Ring ReduceScatter over `ranks` of the chunks [offset, offset + len(ranks)*size): group i
    (size chunks) ends summed on ranks[i]."""
    k = len(ranks)
    for i in range(k):
        acc = chunk(ranks[(i + 1) % k], Buffer.input, offset + i * size, size)
        for step in range(1, k):
            nxt = ranks[(i + 1 + step) % k]
            acc = chunk(nxt, Buffer.input, offset + i * size, size).reduce(acc)


def all_gather(ranks, offset, size):
    """Ring AllGather over `ranks`: group i, held by ranks[i], reaches every rank of the ring."""
    k = len(ranks)
    for i in range(k):
        c = chunk(ranks[i], Buffer.input, offset + i * size, size)
        for step in range(1, k):
            c = c.copy(ranks[(i + step) % k], Buffer.input, offset + i * size)


def hierarchical_allreduce(nodes, gpus_per_node, instances=None, protocol="Simple"):
    N, G = nodes, gpus_per_node
    size = N * G
    with MSCCLProgram("hierarchical_allreduce", None, AllReduce(size, size, True), instances, protocol=protocol,
                      gpus_per_node=G) as prog:
        local = [[k * G + g for g in range(G)] for k in range(N)]
        cross = [[k * G + g for k in range(N)] for g in range(G)]
        for ranks in local:
            reduce_scatter(ranks, 0, N)
        for g, ranks in enumerate(cross):
            reduce_scatter(ranks, g * N, 1)
        for g, ranks in enumerate(cross):
            all_gather(ranks, g * N, 1)
        for ranks in local:
            all_gather(ranks, 0, N)
    return prog


if __name__ == "__main__":
    G = param("GPUPerNode", 8)
    prog = hierarchical_allreduce(param("nRanks", 16) // G, G)
    if not run_by_command():
        print("verified" if weft.verify(prog) else "WRONG")
        print(weft.simulate(prog, "a100-2x8", sizes="1M:256M:16").table())
