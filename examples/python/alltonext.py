"""AllToNext (paper 004 §7.4; algorithms/alltonext.rccl): rank r sends its whole buffer of G
chunks to rank r+1. Inside a node that is one transfer; across a node boundary, from the last
GPU s of node k to the first GPU d of node k+1, the buffer is split so that every GPU's NIC
carries one chunk: chunk c goes s -> (k, c) -> (k+1, c) -> d. A collective of its own, so the
program states its postcondition (Custom.expect).

    python3 examples/python/alltonext.py
"""
import weft
from weft.language import *
from weft.language.collectives import Custom


def alltonext(size, gpus_per_node, instances=None):
    n, G = size, gpus_per_node
    if n % G:
        raise Error("alltonext: %d ranks are not whole nodes of %d GPUs" % (n, G))
    coll = Custom(n, G, G, inplace=False, name="alltonext")
    for r in range(n - 1):
        for c in range(G):
            coll.expect(r + 1, c, [(r, c)])
    with MSCCLProgram("alltonext", None, coll, instances, gpus_per_node=G) as prog:
        for r in range(n - 1):
            s, d = r, r + 1
            if s // G == d // G:  # inside a node: the whole buffer at once
                chunk(s, Buffer.input, 0, G).copy(d, Buffer.output, 0)
                continue
            k = s // G
            for c in range(G):
                relay_out, relay_in = k * G + c, (k + 1) * G + c
                x = chunk(s, Buffer.input, c)
                if relay_out != s:
                    x = x.copy(relay_out, Buffer.scratch, 0)
                if relay_in != d:
                    x = x.copy(relay_in, Buffer.scratch, 1)
                    x.copy(d, Buffer.output, c)
                else:
                    x.copy(d, Buffer.output, c)
    return prog


if __name__ == "__main__":
    prog = alltonext(param("nRanks", 16), param("GPUPerNode", 8))
    if not run_by_command():
        print("verified" if weft.verify(prog) else "WRONG")
        print(weft.simulate(prog, "a100-2x8", sizes="1M:256M:16").table())
