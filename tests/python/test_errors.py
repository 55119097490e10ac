"""Every error path of weft.language and the pipeline: each raises weft.Error with its code,
and the DSL's name the Python file and line of the call at fault."""
import os

import pytest

import weft
from weft.language import *
from weft.language.collectives import AllReduce, AllGather, Custom
from weft.topologies import fully_connected

HERE = os.path.abspath(__file__)


def here_line(offset=0):
    import inspect
    return inspect.currentframe().f_back.f_lineno + offset


def raises_at(code, line, fragment, fn):
    with pytest.raises(weft.Error) as e:
        fn()
    msg = str(e.value)
    assert e.value.code == code, msg
    if line is not None:
        assert "%s:%d" % (HERE, line) in msg, msg
    assert fragment in msg, msg
    return msg


def test_stale_reference_names_both_lines():
    with MSCCLProgram("p", None, AllReduce(2, 2, True)):
        a = chunk(0, Buffer.input, 0); taken = here_line()
        b = chunk(1, Buffer.input, 0)
        a.copy(1, Buffer.input, 0); wrote = here_line()
        msg = raises_at("InvalidUsage", here_line(1), "stale reference",
                        lambda: b.copy(0))
        assert "taken at %s:%d" % (HERE, taken + 1) in msg
        assert "copy at %s:%d" % (HERE, wrote) in msg


def test_out_of_range_and_empty_chunks():
    with MSCCLProgram("p", None, AllGather(2, 1, False)):
        raises_at("InvalidArgument", here_line(1), "rank 5 is out of range",
                  lambda: chunk(5, Buffer.input, 0))
        raises_at("InvalidArgument", here_line(1), "out of range",
                  lambda: chunk(0, Buffer.input, 3))
        raises_at("InvalidArgument", here_line(1), "holds no data yet",
                  lambda: chunk(0, Buffer.output, 1))
        raises_at("InvalidArgument", here_line(1), "count must be at least 1",
                  lambda: chunk(0, Buffer.input, 0, 0))


def test_reduce_errors():
    with MSCCLProgram("p", None, AllReduce(2, 4, True)):
        a = chunk(0, Buffer.input, 0)
        raises_at("InvalidArgument", here_line(1), "reduced into itself",
                  lambda: a.reduce(chunk(0, Buffer.input, 0)))
        raises_at("InvalidArgument", here_line(1), "cannot be reduced into",
                  lambda: a.reduce(chunk(1, Buffer.input, 0, 2)))
        raises_at("InvalidArgument", here_line(1), "overlap",
                  lambda: chunk(0, Buffer.input, 0, 2).copy(0, Buffer.input, 1))


def test_channels():
    with MSCCLProgram("p", None, AllReduce(2, 2, True)) as prog:
        raises_at("InvalidArgument", here_line(1), "channel 32 is out of range",
                  lambda: chunk(0, Buffer.input, 0).copy(1, ch=32))
        chunk(1, Buffer.input, 1).reduce(chunk(0, Buffer.input, 1), ch=3)
        chunk(0, Buffer.input, 0).copy(1, Buffer.scratch, 0, ch=1)
    assert prog._prog.transfer_channels == [3, 1]
    assert prog.algorithm().channels == 4


def test_split_group_buffers():
    with MSCCLProgram("p", None, AllReduce(2, 4, True)):
        c = chunk(0, Buffer.input, 0, 4)
        raises_at("InvalidArgument", None, "cannot be cut into 3", lambda: c.split(3))
        a, b = c.split(2)
        assert (a.index, a.size, b.index, b.size) == (0, 2, 2, 2)
        raises_at("InvalidArgument", here_line(1), "not adjacent",
                  lambda: chunk(0, Buffer.input, 0).group(chunk(0, Buffer.input, 2)))
        raises_at("InvalidArgument", None, "named scratch buffers", lambda: chunk(0, "mine", 0))
        raises_at("InvalidArgument", None, "not int", lambda: chunk(0, 3, 0))


def test_outside_a_program():
    raises_at("InvalidUsage", here_line(), "outside a program", lambda: chunk(0, Buffer.input, 0))
    raises_at("InvalidArgument", here_line(), "no program is being traced", lambda: XML())
    with pytest.raises(weft.Error):
        Check()


def test_program_arguments():
    raises_at("InvalidArgument", here_line(1), "topology fully_connected-4 has 4 GPUs",
              lambda: MSCCLProgram("p", fully_connected(4), AllReduce(2, 2, True)))
    raises_at("InvalidArgument", here_line(1), "the collective is one of",
              lambda: MSCCLProgram("p", None, "allreduce"))
    raises_at("InvalidArgument", here_line(1), "instances must be",
              lambda: MSCCLProgram("p", None, AllReduce(2, 2, True), 0))
    raises_at("InvalidArgument", here_line(1), "protocol must be",
              lambda: MSCCLProgram("p", None, AllReduce(2, 2, True), protocol="ll"))
    raises_at("InvalidArgument", None, "chunk_factor must be", lambda: AllReduce(2, 0, True))
    raises_at("InvalidArgument", None, "size must be a positive", lambda: fully_connected(0))
    raises_at("InvalidArgument", here_line(1), "parallelize(): the factor",
              lambda: parallelize(0))


def test_parallelize_is_program_wide():
    with MSCCLProgram("p", None, AllReduce(2, 2, True), 2) as whole:
        with parallelize(4):
            chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))
    assert whole.instances == 8
    with MSCCLProgram("p", None, AllReduce(2, 2, True)) as part:
        with parallelize(4):
            start = here_line()
            chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))
        chunk(0, Buffer.input, 1).reduce(chunk(1, Buffer.input, 1))
    raises_at("InvalidArgument", start - 1, "covers 1 of the program's 2 transfers", lambda: part.instances)
    with MSCCLProgram("p", None, AllReduce(2, 2, True)) as none:
        pass
    assert none.instances == 0


def test_custom_expect_and_wrong_algorithm():
    coll = Custom(2, 1, 1).expect(1, 0, [(0, 0)])
    with MSCCLProgram("p", None, coll) as prog:
        chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
    v = weft.verify(prog)
    assert not v.ok and "rank 1's output chunk 0 is empty" in v.errors[0], v.errors
    assert not prog.check()
    raises_at("Verify", None, "fails verification", lambda: weft.compile(prog, "h200-1x2"))
    with MSCCLProgram("twice", None, AllReduce(2, 1, True)) as twice:
        chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))
        chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0)); line = here_line()
        chunk(1, Buffer.input, 0).copy(0)
    v = weft.verify(twice)
    assert v.errors and v.errors[0].startswith("%s:%d" % (HERE, line)) and "twice" in v.errors[0], v.errors
    raises_at("InvalidUsage", None, "only Custom programs",
              lambda: MSCCLProgram("q", None, AllReduce(2, 2, True))._prog.expect(0, 0, [(0, 0)]))


def test_pipeline_errors(tmp_path):
    from ring_allreduce import ring_allreduce
    prog = ring_allreduce(2)
    raises_at("InvalidArgument", None, "unknown scheduler 'nope'", lambda: weft.compile(prog, "h200-1x2", scheduler="nope"))
    raises_at("InvalidArgument", None, "unknown allocator", lambda: weft.compile(prog, "h200-1x2", allocator="x"))
    raises_at("InvalidArgument", None, "instances must be in", lambda: weft.compile(prog, "h200-1x2", instances=65))
    raises_at("InvalidArgument", None, "takes no option", lambda: weft._weft._compile_algorithm(
        prog.algorithm(), weft.topology("h200-1x2"), True, False, {"speed": 1}))
    raises_at("InvalidArgument", None, "h200-1x3", lambda: weft.topology("h200-1x3"))
    raises_at("InvalidArgument", None, "", lambda: weft.compile(prog, "h200-1x4"))  # 2 ranks, 4 GPUs
    raises_at("InvalidArgument", None, "exactly one of size", lambda: weft.simulate(prog, "h200-1x2"))
    raises_at("InvalidArgument", None, "", lambda: weft.simulate(prog, "h200-1x2", sizes="1M:1K"))
    raises_at("InvalidArgument", None, "", lambda: weft.simulate(prog, "h200-1x2", size="lots"))
    plan = weft.compile(prog, "h200-1x2")
    raises_at("InvalidArgument", None, "compiled already", lambda: weft.simulate(plan, "h200-1x2", size="1M", scheduler="rr"))
    raises_at("InvalidArgument", None, "no such file", lambda: weft.load(str(tmp_path / "none.rccl"), "h200-1x2"))
    bad = tmp_path / "bad.alg"
    bad.write_text("weft-algorithm 1\n{}\n")
    raises_at("Parse", None, "not a weft algorithm file", lambda: weft.load_algorithm_file(str(bad)))
    raises_at("System", None, "cannot read", lambda: weft.load_algorithm_file(str(tmp_path / "missing")))


def test_gc3_switches_are_accepted():
    with MSCCLProgram("p", fully_connected(2), AllReduce(2, 1, True), 1, protocol="LL",
                      threadblock_policy=ThreadblockPolicy.manual, interleaved_replication=False,
                      instr_fusion=False, check_xml=False, dependence_nop=True) as prog:
        chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0), sendtb=0, recvtb=1)
        chunk(1, Buffer.input, 0).copy(0, sendtb=2, recvtb=3)
        assert Check()
    assert prog.compile().summary()["protocol"] == "LL"
    assert prog.instances == 1
