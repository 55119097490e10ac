// The ResCCLang header: the parameters weft knows, their defaults, and how the values
// written in `ResCCLAlgo(...)` combine with the command line's --param overrides.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/algorithm.hpp"
#include "lang/resccl_ast.hpp"
#include "lang/resccl_diagnostics.hpp"

namespace weft::resccl {

/// True for the header parameters whose value is a string: AlgoName, OpType, Protocol.
bool is_string_param(std::string_view name);
/// True for every parameter weft knows (Figure 14's and weft's extensions); any other
/// integer parameter is a user parameter.
bool is_known_param(std::string_view name);

/// The header after defaults and overrides. Every integer parameter, known or the user's,
/// becomes a variable of the body: `variables` maps its name to its value.
struct HeaderValues {
  std::string algo_name;
  Collective collective = Collective::Custom;
  std::string protocol;  ///< "Simple", "LL", "LL128" or empty
  int64_t ranks = 0;
  int64_t chunks = 0;    ///< nChunks: chunks of the data buffer per rank
  int64_t scratch = 0;
  int64_t root = 0;
  bool in_place = true;
  int64_t channels = 1;
  int64_t warps = 16;
  int64_t gpus_per_node = 0;
  int64_t nics_per_node = 0;
  std::map<std::string, int64_t> variables;
};

/// Applies defaults and `overrides` (name -> text, as given to --param) to the header of
/// `program` and checks the values (nRanks and OpType present, counts positive, nChunks a
/// multiple of nRanks for Allgather and Reducescatter, ...). `default_name` is AlgoName
/// when the header has none. Throws weft::Error(Parse) at the offending parameter; an
/// override naming an unknown parameter, or a malformed value, points at the header.
HeaderValues resolve_header(const SourceText& src, const Program& program,
                            const std::map<std::string, std::string>& overrides,
                            const std::string& default_name);

}  // namespace weft::resccl
