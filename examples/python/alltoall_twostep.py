"""Two-step AllToAll (paper 004 §7.3; algorithms/alltoall_twostep.rccl), out of place: inside
each node every chunk goes to the gateway with its destination's local index, then each
gateway sends one bundled transfer of G chunks per remote node. The twin of
dsl:alltoall_twostep.

    python3 examples/python/alltoall_twostep.py
"""
import weft
from weft.language import *
from weft.language.collectives import AllToAll


def alltoall_twostep(size, gpus_per_node, instances=None):
    n, G = size, gpus_per_node
    if n % G:
        raise Error("alltoall_twostep: %d ranks are not whole nodes of %d GPUs" % (n, G))
    nodes = n // G
    with MSCCLProgram("alltoall_twostep", None, AllToAll(n, 1, False), instances, gpus_per_node=G) as prog:
        # Step 0, inside each node: (n1, g1) sends the chunk for (n2, g2) to its gateway (n1, g2).
        for r in range(n):
            n1, g1 = divmod(r, G)
            for g2 in range(G):
                gateway = n1 * G + g2
                chunk(r, Buffer.input, n1 * G + g2).copy(gateway, Buffer.output, r)
                for d in range(1, nodes):
                    n2 = (n1 + d) % nodes
                    chunk(r, Buffer.input, n2 * G + g2).copy(gateway, Buffer.scratch, n2 * G + g1)
        # Step 1, across nodes: each gateway sends the G chunks gathered for (n2, g2) as one.
        for gateway in range(n):
            n1, g2 = divmod(gateway, G)
            for d in range(1, nodes):
                n2 = (n1 + d) % nodes
                chunk(gateway, Buffer.scratch, n2 * G, G).copy(n2 * G + g2, Buffer.output, n1 * G)
    return prog


if __name__ == "__main__":
    prog = alltoall_twostep(param("nRanks", 16), param("GPUPerNode", 8))
    if not run_by_command():
        print("verified" if weft.verify(prog) else "WRONG")
        print(weft.simulate(prog, "a100-2x8", sizes="1M:64M:8").table())
