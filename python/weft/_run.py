"""The runner behind `weft compile prog.py` and `weft simulate prog.py` (lang/python_frontend.cpp):
runs the program as __main__ with the command's parameters and writes the last program it
traced to the algorithm file WEFT_ALGORITHM_OUT. A failure is written to WEFT_ERROR_OUT as
its error code's name, a newline and the message, and the exit status is 2."""
import os
import runpy
import sys
import traceback

import weft
import weft.language as language


def _fail(code, message):
    path = os.environ.get("WEFT_ERROR_OUT")
    if path:
        with open(path, "w") as f:
            f.write(code + "\n" + message + "\n")
    else:
        sys.stderr.write("weft: %s\n" % message)
    return 2


def main(argv):
    if not argv:
        return _fail("InvalidArgument", "weft._run: no program given")
    path = argv[0]
    for kv in filter(None, os.environ.get("WEFT_PARAMS", "").split(",")):
        k, _, v = kv.partition("=")
        language._params[k] = v
    language._run_by_command = True
    sys.argv = [path] + argv[1:]
    try:
        runpy.run_path(path, run_name="__main__")
    except weft.Error as e:
        return _fail(getattr(e, "code", "InvalidArgument"), str(e))
    except SystemExit as e:
        if e.code not in (None, 0):
            return _fail("InvalidArgument", "%s: the program exited with status %s" % (path, e.code))
    except Exception as e:  # a bug in the program: show where
        traceback.print_exc()
        frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) ==
                  os.path.abspath(path)]
        at = "%s:%d" % (path, frames[-1].lineno) if frames else path
        return _fail("InvalidArgument", "%s: the program raised %s: %s" % (at, type(e).__name__, e))
    if not language._done:
        return _fail("InvalidArgument", "%s: the program traced no algorithm (write it inside `with "
                                        "MSCCLProgram(...)`, weft.language)" % path)
    prog = language._done[-1]
    out = os.environ.get("WEFT_ALGORITHM_OUT")
    if not out:
        return _fail("InvalidArgument", "weft._run: WEFT_ALGORITHM_OUT is not set")
    prog.algorithm().save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
