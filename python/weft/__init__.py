"""weft from Python: write collective algorithms in GC3's chunk DSL (weft.language), verify
them, compile them for a topology with any of weft's schedulers, simulate the plans and export
them as plan JSON or MSCCL XML. docs/python.md describes the module."""
import json as _json
import os as _os

from . import _weft
from ._weft import (Algorithm, Buffer, Error, Plan, Topology, VerifyResult, load_algorithm_file, load_plan,
                    topology_presets)

_weft._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)


def _plan_summary(self):
    """What `weft compile --json` prints: algorithm, topology, scheduler, ranks, thread blocks per
    rank, tasks, slots, fused primitives, instances, each phase's seconds, ..."""
    return _json.loads(self._summary())


Plan.summary = _plan_summary

__all__ = ["Algorithm", "Buffer", "Error", "Plan", "Topology", "VerifyResult", "Reports", "compile", "load",
           "load_algorithm_file", "load_plan", "simulate", "topology", "topology_presets", "verify"]


def topology(spec):
    """A topology: a preset name (h200-1x8, a100-4x8, a100-128x8, ...), a JSON file, or a Topology."""
    if isinstance(spec, Topology):
        return spec
    return _weft.load_topology(str(spec))


def _program_of(source):
    """(algorithm, program) for a weft.language program, (source, None) for anything else."""
    if hasattr(source, "_weft_program"):
        prog = source._weft_program()
        return prog.algorithm(), prog
    return source, None


def verify(source):
    """The symbolic verifier's verdict on an Algorithm or a program: a VerifyResult (truthy when
    correct; .errors names rank, chunk, step and the Python line of each fault)."""
    algo, _ = _program_of(source)
    return _weft.verify(algo)


def load(source, topology_spec, params=None, verify=True):
    """The Algorithm of any source the command line takes (a built-in name, a .rccl, .xml or .py
    file, dsl:NAME), sized to the topology as `weft compile` sizes it."""
    return _weft.load(str(source), topology(topology_spec), {k: str(v) for k, v in (params or {}).items()}, verify)


def compile(source, topology_spec, *, params=None, scheduler="hpds", allocator="state", instances=None, max_tbs=0,
            in_place=True, fuse=True, aggregate=True, protocol=None, fifo_depth=4, verify=True, runtime_rule=False,
            memory_budget=None):
    """Compiles a program, an Algorithm, or any source the command line takes (a string) for a
    topology, through the plan builder `weft compile` uses, and returns the checked Plan.

    instances and protocol default to the program's (MSCCLProgram's instances, parallelize,
    protocol), else to the topology's derived instances and Simple."""
    topo = topology(topology_spec)
    algo, prog = _program_of(source)
    if instances is None:
        instances = prog.instances if prog is not None else 0
    if protocol is None:
        protocol = (algo.protocol if isinstance(algo, Algorithm) else "") or "Simple"
    budget = _weft.parse_bytes(str(memory_budget)) if memory_budget is not None else 0
    options = dict(scheduler=scheduler, allocator=allocator, instances=instances, max_tbs=max_tbs,
                   in_place=in_place, fuse=fuse, aggregate=aggregate, protocol=protocol, fifo_depth=fifo_depth,
                   memory_budget=budget)
    if isinstance(algo, Algorithm):
        if params:
            raise Error("compile(): params size a source file or built-in, not a traced program")
        return _weft._compile_algorithm(algo, topo, verify, runtime_rule, options)
    if isinstance(algo, (str, _os.PathLike)):
        return _weft._compile_source(str(algo), topo, {k: str(v) for k, v in (params or {}).items()}, verify,
                                     runtime_rule, options)
    raise Error("compile(): the source is a program, an Algorithm or a source name, not %s" % type(source).__name__)


class Reports(list):
    """The simulator's reports, one dict per size with the keys `weft simulate --json` prints."""

    def __init__(self, reports, rows):
        super().__init__(reports)
        self._rows = rows

    def table(self):
        """The table `weft simulate` prints."""
        return _weft._report_table(self._rows)


def _sizes(size, sizes):
    if (size is None) == (sizes is None):
        raise Error("simulate(): give exactly one of size= and sizes=")
    if size is not None:
        return [_weft.parse_bytes(str(size))]
    if isinstance(sizes, str):
        return _weft.parse_size_range(sizes)
    return [_weft.parse_bytes(str(s)) for s in sizes]


def simulate(source, topology_spec, *, size=None, sizes=None, microbatch="1M", fifo_depth=4, memory_budget=None,
             **compile_options):
    """Simulates a Plan, or compiles a program / Algorithm / source (compile()'s options) and
    simulates its plan, at one size (size=, e.g. "256M") or several (sizes=, a list or a range
    "1M:1G"). Returns Reports: the same figures as `weft simulate` (its --json keys; .table())."""
    topo = topology(topology_spec)
    byte_sizes = _sizes(size, sizes)
    budget = _weft.parse_bytes(str(memory_budget)) if memory_budget is not None else 0
    if isinstance(source, Plan):
        if compile_options:
            raise Error("simulate(): a Plan is compiled already; options %s do not apply" % sorted(compile_options))
        plan = source
    else:
        plan = compile(source, topo, fifo_depth=fifo_depth, memory_budget=memory_budget, **compile_options)
    out = _weft._simulate(plan, topo, byte_sizes, str(microbatch), fifo_depth, budget)
    return Reports([_json.loads(j) for j, _ in out], [row for _, row in out])
