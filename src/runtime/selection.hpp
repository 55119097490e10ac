// The built-in selection table: per call, which algorithm, protocol and number of
// instances run a collective of a given size (DESIGN.md part 10; `weft tune` will fill it
// from measurements). WEFT_ALGO, WEFT_PROTO and WEFT_INSTANCES override its choices.
#pragma once

#include <cstdint>
#include <string>

#include "ir/algorithm.hpp"

namespace weft {

struct Choice {
  std::string algorithm;  ///< a built-in plan name (runtime/builtin_plans.hpp)
  std::string protocol;   ///< "Simple" or "LL"
  int instances = 1;
};

/// The table's choice for `bytes` of payload (the larger of the send and receive buffers
/// of one rank) among `nranks` ranks, before environment overrides.
Choice table_choice(Collective c, uint64_t bytes, int nranks);

/// table_choice with WEFT_ALGO / WEFT_PROTO / WEFT_INSTANCES applied, instances clamped
/// to 1..max_instances.
Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances);

}  // namespace weft
