// Algorithm files: an Algorithm written whole (header, transfers, source locations) so that
// one process can trace it and another compile it. The Python front-end uses them: `weft
// compile prog.py` runs the program in Python, whose weft module writes the traced algorithm
// here, and reads it back (lang/python_frontend.hpp).
//
// Format (version 1): the line "weft-algorithm 1", one line of JSON with everything but the
// transfers (and "transfers": N, "locations": true|false), then N records of 9 little-endian
// int32 (src rank, src buffer, src index, dst rank, dst buffer, dst index, count, op, step),
// then, with locations, N records of 3 (line, column, file). Binary, so that the two million
// transfers of a 1,024-rank ring take 100 MB and a fraction of a second.
#pragma once

#include <string>

#include "ir/algorithm.hpp"

namespace weft {

/// Writes `algo` to `path`. Throws Error(System) naming the file when it cannot be written.
void save_algorithm_file(const Algorithm& algo, const std::string& path);

/// Reads an algorithm file and checks its shape (check_shape). Throws Error(System) for an
/// unreadable file, Error(Parse) naming the file and what is wrong for a malformed one,
/// Error(Verify) for transfers out of bounds.
Algorithm load_algorithm_file(const std::string& path);

}  // namespace weft
