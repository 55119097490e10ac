"""GC3's chunk DSL (msccl.language) on weft: a GC3 program ports by importing from
weft.language, weft.language.collectives and weft.topologies instead of msccl's.

    from weft.language import *
    from weft.language.collectives import AllReduce
    from weft.topologies import fully_connected

    with MSCCLProgram("ring", fully_connected(4), AllReduce(4, 4, True), instances=1):
        c = chunk(0, Buffer.input, 0)
        c = chunk(1, Buffer.input, 0).reduce(c, ch=0)
        ...
        XML()     # the program compiled by weft, as MSCCL XML
        Check()   # the symbolic verifier

chunk(), Ref.copy, Ref.reduce, Ref.split and Ref.group are weft's C++ chunk DSL
(src/lang/chunk_dsl.hpp); every error names the Python file and line of the call.
docs/python.md says what differs from GC3."""
import os as _os
import sys as _sys

import weft as _w
from weft import _weft
from weft._weft import Buffer, Error, Ref, chunk
from weft.language.collectives import Collective

__all__ = ["Buffer", "Error", "Ref", "ThreadblockPolicy", "chunk", "MSCCLProgram", "Program", "XML", "Check", "parallelize", "param",
           "current_program", "run_by_command"]

_stack = []     # programs being traced (innermost last)
_done = []      # the last program traced to its end (weft._run takes it); only one is kept
_params = {}    # weft compile prog.py's parameters (WEFT_PARAMS)


class ThreadblockPolicy:
    """GC3's thread-block policies, accepted for MSCCLProgram(threadblock_policy=...) and ignored:
    weft's allocator places thread blocks."""
    auto = "auto"
    manual = "manual"


def _here():
    f, line, _col = _weft._here()
    return "%s:%d" % (f, line)


def param(name, default=None):
    """A parameter of the program: --param name=value of `weft compile prog.py` (nRanks,
    GPUPerNode and NICPerNode default to the topology's), else `default`. Integers come back
    as int."""
    v = _params.get(name)
    if v is None:
        if default is None:
            raise Error("%s: parameter %s is not given (weft compile prog.py --param %s=...) and has no default"
                        % (_here(), name, name))
        return default
    return int(v) if v.lstrip("-").isdigit() else v


def run_by_command():
    """True when `weft compile prog.py` or `weft simulate prog.py` runs the program (which then
    takes the last program traced), False when Python runs it directly."""
    return _run_by_command


_run_by_command = False


def current_program():
    if not _stack:
        raise Error("%s: no program is being traced: write this inside `with MSCCLProgram(...)`" % _here())
    return _stack[-1]


class MSCCLProgram:
    """A program: MSCCLProgram(name, topology, collective, instances, protocol=...) as a
    context manager, GC3's signature. topology is a weft Topology (weft.topologies), its GPU
    count the collective's ranks, or None. instances is the program-wide thread-block count per
    link (None: weft derives it from the topology). threadblock_policy, interleaved_replication,
    instr_fusion, check_xml and dependence_nop are GC3 compiler switches weft accepts and ignores
    (its own compiler fuses and places thread blocks)."""

    def __init__(self, name, topo, collective, instances=None, protocol="Simple", threadblock_policy=None,
                 interleaved_replication=True, instr_fusion=True, check_xml=True, dependence_nop=False,
                 gpus_per_node=None):
        if not isinstance(collective, Collective):
            raise Error("%s: MSCCLProgram(): the collective is one of weft.language.collectives (AllReduce(...), ...), "
                        "not %r" % (_here(), collective))
        if topo is not None and not isinstance(topo, _w.Topology):
            raise Error("%s: MSCCLProgram(): the topology is a weft Topology (weft.topologies.fully_connected(n), "
                        "weft.topology('a100-2x4')) or None, not %r" % (_here(), topo))
        if topo is not None and topo.num_gpus != collective.num_ranks:
            raise Error("%s: MSCCLProgram(): topology %s has %d GPUs, the collective %d ranks"
                        % (_here(), topo.name, topo.num_gpus, collective.num_ranks))
        if instances is not None and (not isinstance(instances, int) or not 1 <= instances <= 64):
            raise Error("%s: MSCCLProgram(): instances must be an integer in [1, 64] or None, not %r"
                        % (_here(), instances))
        if protocol not in ("Simple", "LL", "LL128"):
            raise Error("%s: MSCCLProgram(): protocol must be Simple, LL or LL128, not %r" % (_here(), protocol))
        if gpus_per_node is None:
            gpus_per_node = topo.gpus_per_node if topo is not None else 0
        self.name = name
        self.topology = topo
        self.collective = collective
        self.protocol = protocol
        self._instances = instances
        self._parallel = []  # (factor, first transfer, end transfer, where) per parallelize block
        self._prog = _weft.Program(name=name, collective=collective.kind, ranks=collective.num_ranks,
                                   input_chunks=collective.input_chunks, output_chunks=collective.output_chunks,
                                   in_place=collective.inplace, root=collective.root, gpus_per_node=gpus_per_node,
                                   protocol=protocol)
        for rank, index, contributions in collective.expectations:
            self._prog.expect(rank, index, contributions)

    def __enter__(self):
        _weft._push(self._prog)
        _stack.append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _weft._pop()
        _stack.pop()
        if exc_type is None:
            _done[:] = [self]
        return False

    # ---- what the program traced ----
    def _weft_program(self):
        return self

    def algorithm(self):
        """The traced Algorithm (transfers in program order, steps by dependency)."""
        return self._prog.algorithm()

    @property
    def num_transfers(self):
        return self._prog.num_transfers

    @property
    def instances(self):
        """Thread blocks per link for compile(): MSCCLProgram's instances times the
        parallelize() factor, which must cover every transfer (weft's instances are program-
        wide); 0 when neither is given (derived from the topology)."""
        n = self._prog.num_transfers
        factors = set()
        covered = 0
        for factor, begin, end, where in self._parallel:
            if end is None:
                end = n
            factors.add(factor)
            covered += end - begin
        if self._parallel and (len(factors) > 1 or covered != n):
            factor, _, _, where = self._parallel[0]
            raise Error("%s: parallelize(%d) covers %d of the program's %d transfers with %s: weft's instances are "
                        "program-wide, so one parallelize block must hold every transfer (or give MSCCLProgram "
                        "instances=)" % (where, factor, covered, n,
                                         "factors " + ", ".join(map(str, sorted(factors))) if len(factors) > 1
                                         else "one factor"))
        base = self._instances
        if factors:
            total = (base or 1) * factors.pop()
            if total > 64:
                raise Error("%s: instances times parallelize() is %d, more than 64" % (self._parallel[0][3], total))
            return total
        return base or 0

    def check(self):
        """GC3's Check(): runs the symbolic verifier; prints its errors to stderr, returns True when correct."""
        v = _weft.verify(self.algorithm())
        for e in v.errors:
            print("weft: " + e, file=_sys.stderr)
        return v.ok

    def compile(self, topology=None, **options):
        """weft.compile(self, topology or the program's, **options)."""
        topo = topology if topology is not None else self.topology
        if topo is None:
            raise Error("%s: compile(): the program has no topology; name one" % self.name)
        return _w.compile(self, topo, **options)

    def xml(self, topology=None, **options):
        """The program compiled by weft, as MSCCL XML text (docs/msccl-xml.md)."""
        return self.compile(topology, **options).to_msccl_xml(self.name)


Program = MSCCLProgram


class parallelize:
    """with parallelize(n): every transfer inside runs on n thread blocks per link (GC3's
    parallelize). weft's instances are program-wide: the block must hold the whole program."""

    def __init__(self, factor):
        if not isinstance(factor, int) or not 1 <= factor <= 64:
            raise Error("%s: parallelize(): the factor must be an integer in [1, 64], not %r" % (_here(), factor))
        self.factor = factor
        self.where = _here()

    def __enter__(self):
        prog = current_program()
        self._entry = [self.factor, prog.num_transfers, None, self.where]
        prog._parallel.append(self._entry)
        self._prog = prog
        return self

    def __exit__(self, exc_type, exc, tb):
        self._entry[2] = self._prog.num_transfers
        return False


def XML():
    """GC3's XML(): prints the current program compiled by weft (its topology, weft's default
    scheduler) as MSCCL XML."""
    print(current_program().xml())


def Check():
    """GC3's Check(): verifies the current program; True when correct."""
    return current_program().check()
