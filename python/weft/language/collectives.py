"""GC3's collectives (msccl.language.collectives): what a program computes and on which
buffers. chunk_factor is GC3's: chunks per rank of the input for AllReduce, AllGather,
Broadcast and Reduce; chunks per rank and destination for ReduceScatter and AllToAll."""
from weft._weft import Error

__all__ = ["Collective", "AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Broadcast", "Reduce", "Custom"]


class Collective:
    """A collective on num_ranks ranks: its weft name, input chunks per rank, output chunks per
    rank (-1: as the collective implies), in place or not, root, postcondition (Custom)."""

    def __init__(self, kind, num_ranks, input_chunks, inplace, output_chunks=-1, root=0):
        for what, v in (("num_ranks", num_ranks), ("chunk count", input_chunks)):
            if not isinstance(v, int) or v < 1:
                raise Error("%s(): %s must be a positive integer, not %r" % (type(self).__name__, what, v))
        self.kind = kind
        self.num_ranks = num_ranks
        self.input_chunks = input_chunks
        self.output_chunks = output_chunks
        self.inplace = bool(inplace)
        self.root = root
        self.expectations = []

    @property
    def name(self):
        return self.kind.lower()


def _factor(cls, chunk_factor):
    if not isinstance(chunk_factor, int) or chunk_factor < 1:
        raise Error("%s(): chunk_factor must be a positive integer, not %r" % (cls, chunk_factor))
    return chunk_factor


class AllReduce(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__("AllReduce", num_ranks, _factor("AllReduce", chunk_factor), inplace)


class AllGather(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__("AllGather", num_ranks, _factor("AllGather", chunk_factor), inplace)


class ReduceScatter(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__("ReduceScatter", num_ranks, num_ranks * _factor("ReduceScatter", chunk_factor), inplace)


class AllToAll(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__("AllToAll", num_ranks, num_ranks * _factor("AllToAll", chunk_factor), inplace)


class Broadcast(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace, root=0):
        super().__init__("Broadcast", num_ranks, _factor("Broadcast", chunk_factor), inplace, root=root)


class Reduce(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace, root=0):
        super().__init__("Reduce", num_ranks, _factor("Reduce", chunk_factor), inplace, root=root)


class Custom(Collective):
    """A collective of your own (GC3 subclasses Collective; weft states the postcondition):
    input_chunks and output_chunks per rank, then expect(rank, index, [(src_rank, src_chunk), ...])
    for each output chunk that must hold exactly those inputs (reduced when several)."""

    def __init__(self, num_ranks, input_chunks, output_chunks, inplace=False, name="custom"):
        super().__init__("Custom", num_ranks, input_chunks, inplace, output_chunks=output_chunks)
        self.custom_name = name

    def expect(self, rank, index, contributions):
        self.expectations.append((rank, index, [tuple(c) for c in contributions]))
        return self

    @property
    def name(self):
        return self.custom_name
