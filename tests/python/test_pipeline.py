"""The pipeline from Python (compile for presets and files with every scheduler, simulate with
`weft simulate`'s report, plan JSON and MSCCL XML exports, algorithm files) and the command
line's Python front-end (`weft compile prog.py`, `weft simulate prog.py`) with its errors."""
import json
import os
import stat

import pytest

import weft
from conftest import EXAMPLES, ROOT, line_of
from ring_allreduce import ring_allreduce

RING = os.path.join(EXAMPLES, "ring_allreduce.py")


@pytest.mark.parametrize("scheduler", ["hpds", "algo", "stage", "rr", "gc3"])
def test_compile_every_scheduler(scheduler):
    plan = weft.compile(ring_allreduce(8), "a100-2x4", scheduler=scheduler)
    s = plan.summary()
    assert (s["scheduler"], s["ranks"], s["tasks"]) == (scheduler, 8, 112)
    assert s["tbs_per_rank_max"] >= 1
    assert plan.check_deadlock() == (True, "")


def test_compile_topology_file(tmp_path):
    path = tmp_path / "topo.json"
    path.write_text(weft.topology("a100-2x4").to_json())
    a = weft.compile(ring_allreduce(8), str(path)).to_json()
    b = weft.compile(ring_allreduce(8), "a100-2x4").to_json()
    assert json.loads(a)["ranks"] == json.loads(b)["ranks"]


def test_instances_and_protocol_reach_the_plan():
    prog = ring_allreduce(8, instances=3)
    s = weft.compile(prog, "a100-2x4").summary()
    assert s["instances"] == {"nvlink": 3, "network": 3, "local": 3}
    assert weft.compile(prog, "a100-2x4", instances=2).summary()["instances"]["nvlink"] == 2
    assert weft.compile(prog, "a100-2x4", protocol="LL").summary()["protocol"] == "LL"


def test_exports_round_trip(tmp_path):
    plan = weft.compile(ring_allreduce(8), "a100-2x4")
    path = str(tmp_path / "plan.json")
    plan.save(path)
    again = weft.load_plan(path)
    assert again.to_json() == plan.to_json()
    xml = plan.to_msccl_xml("ring8")
    assert xml.lstrip().startswith("<algo") and 'name="ring8"' in xml and 'ngpus="8"' in xml
    xml_path = tmp_path / "ring.xml"
    xml_path.write_text(xml)
    assert weft.load(str(xml_path), "a100-2x4").ranks == 8  # weft reads its own export back
    alg = str(tmp_path / "ring.alg")
    ring_allreduce(8).algorithm().save(alg)
    assert weft.load_algorithm_file(alg).transfers() == ring_allreduce(8).algorithm().transfers()
    assert weft.load_algorithm_file(alg).location(0).startswith(RING + ":")


def test_simulate_matches_the_command(run_weft, tmp_path):
    plan = weft.compile(ring_allreduce(8), "a100-2x4")
    plan_path = str(tmp_path / "plan.json")
    plan.save(plan_path)
    ours = weft.simulate(plan, "a100-2x4", sizes=["1M", "64M"])
    r = run_weft("simulate", plan_path, "-t", "a100-2x4", "--sizes", "1M:64M:64", "--json")
    assert r.returncode == 0, r.stderr
    theirs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        for timing in ("wall_seconds", "sim_seconds"):  # how long the simulator itself took
            a.pop(timing, None), b.pop(timing, None)
        assert a == b
    assert "busbw" in ours.table() and "67108864" in ours.table()
    assert weft.simulate(ring_allreduce(8), "a100-2x4", size="4M", scheduler="gc3")[0]["scheduler"] == "gc3"


def test_cli_compile_python_program(run_weft, tmp_path):
    out = str(tmp_path / "plan.json")
    r = run_weft("compile", RING, "-t", "a100-2x4", "--json", "-o", out)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["ranks"], j["tasks"], j["algorithm"]) == (8, 112, "ring_allreduce")
    assert weft.load_plan(out).to_json() == weft.compile(ring_allreduce(8), "a100-2x4").to_json()
    # nRanks follows the topology (the program reads param("nRanks", 8)).
    r = run_weft("compile", RING, "-t", "a100-2x8", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tasks"] == 2 * 16 * 15, r.stderr


def test_cli_simulate_python_program(run_weft):
    r = run_weft("simulate", os.path.join(EXAMPLES, "hm_allreduce.py"), "-t", "a100-2x8", "--size", "64M", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.splitlines()[0])
    assert rep["algorithm"] == "hm_allreduce" and rep["ranks"] == 16 and rep["busbw_GBps"] > 0


def test_cli_program_error_names_the_line(run_weft, tmp_path):
    prog = tmp_path / "stale.py"
    prog.write_text("from weft.language import *\n"
                    "from weft.language.collectives import AllReduce\n"
                    "with MSCCLProgram('s', None, AllReduce(2, 2, True)):\n"
                    "    a = chunk(0, Buffer.input, 0)\n"
                    "    b = chunk(1, Buffer.input, 0)\n"
                    "    a.copy(1)\n"
                    "    b.copy(0)\n")
    r = run_weft("compile", str(prog), "-t", "h200-1x2")
    assert r.returncode == 2
    assert "%s:7:5: copy() uses a stale reference" % prog in r.stderr, r.stderr


def test_cli_wrong_algorithm_names_the_line(run_weft, tmp_path):
    prog = tmp_path / "wrong.py"
    prog.write_text("from weft.language import *\n"
                    "from weft.language.collectives import AllReduce\n"
                    "with MSCCLProgram('w', None, AllReduce(2, 1, True)):\n"
                    "    chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))\n"
                    "    chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))\n"
                    "    chunk(1, Buffer.input, 0).copy(0)\n")
    r = run_weft("simulate", str(prog), "-t", "h200-1x2", "--size", "1M")
    assert r.returncode == 2 and "%s:5:5: step 1" % prog in r.stderr and "twice" in r.stderr, r.stderr


def test_cli_python_failures(run_weft, tmp_path):
    nothing = tmp_path / "nothing.py"
    nothing.write_text("x = 1\n")
    r = run_weft("compile", str(nothing), "-t", "h200-1x2")
    assert r.returncode == 2 and "traced no algorithm" in r.stderr, r.stderr
    buggy = tmp_path / "buggy.py"
    buggy.write_text("import weft\n\nundefined_name\n")
    r = run_weft("compile", str(buggy), "-t", "h200-1x2")
    assert r.returncode == 2 and "%s:3: the program raised NameError" % buggy in r.stderr, r.stderr
    r = run_weft("compile", str(tmp_path / "absent.py"), "-t", "h200-1x2")
    assert r.returncode == 2 and "absent.py: no such file" in r.stderr, r.stderr
    r = run_weft("compile", RING, "-t", "h200-1x2", env={"WEFT_PYTHON": str(tmp_path / "no-python")})
    assert r.returncode == 2 and "cannot run the Python interpreter" in r.stderr, r.stderr
    isolated = tmp_path / "isolated-python"  # ignores PYTHONPATH, so it cannot find the module
    isolated.write_text("#!/bin/sh\nexec /usr/bin/env python3 -I \"$@\"\n")
    isolated.chmod(isolated.stat().st_mode | stat.S_IEXEC)
    r = run_weft("compile", RING, "-t", "h200-1x2", env={"WEFT_PYTHON": str(isolated)})
    assert r.returncode == 2 and "cannot import weft's module" in r.stderr, r.stderr


def test_program_prints_do_not_reach_json(run_weft, tmp_path):
    prog = tmp_path / "chatty.py"
    prog.write_text(open(RING).read().replace("if __name__", "print('hello')\nif __name__"))
    r = run_weft("compile", str(prog), "-t", "h200-1x8", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ranks"] == 8 and "hello" in r.stderr


def test_xml_and_check_inside_a_program(capsys):
    from weft.language import MSCCLProgram, XML, Check, Buffer, chunk
    from weft.language.collectives import AllGather
    from weft.topologies import fully_connected
    with MSCCLProgram("ag", fully_connected(4), AllGather(4, 1, False)):
        for r in range(4):
            c = chunk(r, Buffer.input, 0)
            for d in range(4):
                c.copy(d, Buffer.output, r)
        assert Check()
        XML()
    out = capsys.readouterr().out
    assert out.lstrip().startswith("<algo") and 'coll="allgather"' in out and 'ngpus="4"' in out, out[:200]
    with MSCCLProgram("none", None, AllGather(2, 1, False)) as prog:
        pass
    with pytest.raises(weft.Error, match="no topology"):
        prog.xml()
