// The Python front-end of the command line: `weft compile prog.py`, `weft simulate prog.py`
// (and every other place the plan builder takes a source) run a Python program written with
// weft's module (docs/python.md) and take the algorithm it traced.
//
// The program runs in a child process: the interpreter WEFT_PYTHON names, else the one the
// module was built for, else `python3` from PATH; the build tree's module folder goes first on
// PYTHONPATH when the command runs from the build tree. The child imports weft._run, which
// runs the file as __main__ with the parameters in WEFT_PARAMS (weft.language.param) and
// writes the last program it traced to an algorithm file (lang/algorithm_file.hpp); the
// child's standard output goes to the command's standard error, so that a program's prints
// never mix with `--json` output.
#pragma once

#include <map>
#include <string>

#include "ir/algorithm.hpp"
#include "util/error.hpp"

namespace weft {

/// The code's enumerator name ("InvalidArgument"): weft.Error.code in Python, and how the
/// runner names a failure's code to the command.
std::string_view error_code_identifier(ErrorCode code);
/// The code of an identifier; InvalidArgument for one that names none.
ErrorCode error_code_from_identifier(std::string_view name);

/// Whether `source` names a Python program (its name ends in ".py").
bool is_python_path(const std::string& source);

/// Runs the program and returns the algorithm it traced, with its transfers' locations in
/// the program. Throws weft::Error: InvalidArgument for a missing file, a missing interpreter
/// or module (saying which and how to get it), or a program that traced nothing; the error
/// the program raised (its code, and a message naming the Python file and line) when it
/// failed; System when the child cannot be run or its output read.
Algorithm load_python_program(const std::string& path, const std::map<std::string, std::string>& params);

}  // namespace weft
