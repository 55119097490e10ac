"""Every built-in chunk-DSL algorithm (src/lang/chunk_dsl_algorithms.cpp), written in Python
with weft.language (examples/python), traces the same algorithm as its C++ form and compiles
to the same plan; the paper-004 examples verify."""
import pytest

import weft
from allpairs_allreduce import allpairs_allreduce
from alltoall_twostep import alltoall_twostep
from alltonext import alltonext
from hierarchical_allreduce import hierarchical_allreduce
from hm_allreduce import hm_allreduce
from ring_allreduce import ring_allreduce

TWINS = [
    ("ring_allreduce", lambda n, g: ring_allreduce(n)),
    ("allpairs_allreduce", lambda n, g: allpairs_allreduce(n)),
    ("hm_allreduce", hm_allreduce),
    ("alltoall_twostep", alltoall_twostep),
]


def cpp_twin(name, n, g):
    # weft.load sizes dsl:NAME to the topology's GPUs unless params say otherwise.
    return weft.load("dsl:" + name, "h200-1x8", params={"nRanks": n, "GPUPerNode": g})


@pytest.mark.parametrize("name,make", TWINS, ids=[t[0] for t in TWINS])
@pytest.mark.parametrize("n,g", [(1, 1), (2, 2), (4, 2), (8, 4), (16, 8)])
def test_same_algorithm_as_cpp(name, make, n, g):
    if n == 1 and name != "ring_allreduce":
        pytest.skip("one rank: only the ring is defined for it in both forms")
    py = make(n, g).algorithm()
    cpp = cpp_twin(name, n, g)
    assert py.same_transfers(cpp), name
    assert py.transfers() == cpp.transfers()
    assert (py.collective, py.ranks, py.input_chunks, py.output_chunks, py.in_place) == \
        (cpp.collective, cpp.ranks, cpp.input_chunks, cpp.output_chunks, cpp.in_place)
    assert weft.verify(py).ok


@pytest.mark.parametrize("name,make", TWINS, ids=[t[0] for t in TWINS])
@pytest.mark.parametrize("topo,g", [("a100-2x4", 4), ("a100-2x8", 8)])
@pytest.mark.parametrize("scheduler", ["hpds", "gc3"])
def test_same_plan_as_cpp(name, make, topo, g, scheduler):
    n = weft.topology(topo).num_gpus
    py = weft.compile(make(n, g), topo, scheduler=scheduler)
    cpp = weft.compile("dsl:" + name, topo, scheduler=scheduler)
    assert py.to_json() == cpp.to_json()
    assert py.summary()["tasks"] == cpp.summary()["tasks"]


@pytest.mark.parametrize("make,n,g", [(alltonext, 16, 8), (alltonext, 8, 4), (alltonext, 8, 8), (alltonext, 4, 1),
                                      (lambda n, g: hierarchical_allreduce(n // g, g), 16, 8),
                                      (lambda n, g: hierarchical_allreduce(n // g, g), 8, 2),
                                      (lambda n, g: hierarchical_allreduce(n // g, g), 4, 4)])
def test_paper_examples_verify(make, n, g):
    prog = make(n, g)
    v = weft.verify(prog)
    assert v.ok, v.errors
    assert prog.check()


def test_alltonext_matches_rccl():
    # The same transfers; steps differ where the .rccl waits a step the DSL's dependencies do
    # not ask for (the last GPU's own chunk goes out at step 0 here, at step 1 there).
    py = alltonext(16, 8).algorithm()
    rccl = weft.load("alltonext", "a100-2x8")
    assert sorted(t[:8] for t in py.transfers()) == sorted(t[:8] for t in rccl.transfers())


def test_hierarchical_allreduce_moves_groups():
    prog = hierarchical_allreduce(2, 4)
    counts = {t[6] for t in prog.algorithm().transfers()}
    assert counts == {1, 2}, counts  # the intra-node rings move blocks of N = 2 chunks
