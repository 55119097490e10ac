"""pytest set-up for weft's Python tests (ctest runs them with PYTHONPATH=build/python and
WEFT_BIN=the weft command; tests/CMakeLists.txt)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples", "python")
sys.path.insert(0, EXAMPLES)


@pytest.fixture
def weft_bin():
    path = os.environ.get("WEFT_BIN", os.path.join(ROOT, "build", "bin", "weft"))
    if not os.path.exists(path):
        pytest.fail("the weft command is not built at %s (set WEFT_BIN)" % path)
    return path


@pytest.fixture
def run_weft(weft_bin):
    def run(*args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([weft_bin, *args], capture_output=True, text=True, env=e, timeout=300)
    return run


def line_of(path, text):
    """The 1-based line of `path` that holds `text`."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError("%s not in %s" % (text, path))
