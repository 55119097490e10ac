// Loading algorithms: from ResCCLang text, from files (.rccl ResCCLang, .xml MSCCL XML),
// or by built-in name (algorithms/<name>.rccl).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft {

/// Parameter overrides from the command line (--param nRanks=1024,GPUPerNode=8).
using ParamMap = std::map<std::string, std::string>;

/// Parses and evaluates a ResCCLang program. `filename` is used in error messages only.
/// Throws weft::Error(Parse) with "file:line:column: sentence", then the offending line
/// and a caret under the column. Never returns a partial Algorithm.
Algorithm parse_resccl(std::string_view text, const std::string& filename, const ParamMap& overrides = {});

/// Loads an algorithm from a path (.rccl or .xml by extension) or, when `spec` names no
/// existing file, from the built-in of that name. Throws weft::Error naming the file.
Algorithm load_algorithm(const std::string& spec, const ParamMap& overrides = {});

/// Directory holding algorithms/ and topologies/: WEFT_DATA_DIR, else the share/weft folder
/// next to the binary, else the source tree the binary was built from.
std::string data_dir();

/// The text of algorithms/<name>.rccl as built into the library, if there is one: what
/// load_algorithm takes for a built-in name that the data directory does not hold.
std::optional<std::string_view> embedded_algorithm(std::string_view name);

/// Names of the built-in algorithms (file names under algorithms/ without .rccl), sorted.
std::vector<std::string> builtin_algorithm_names();

}  // namespace weft
