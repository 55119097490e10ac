// The sizes of a standard collective call's buffers, in units of the C API's count (which is
// weftAllGather's send count, weftReduceScatter's receive count and weftAllToAll's count per
// peer): what the runtime checks every call's buffers against (runtime/collectives.cpp) and
// what the host reference sizes its buffers by (exec/collective_reference.hpp). Constexpr
// and inline: it runs on every call.
#pragma once

#include <cstdint>

#include "ir/algorithm.hpp"

namespace weft {

/// How many counts each rank's send buffer holds: nranks for ReduceScatter and AllToAll, one
/// for the others.
constexpr uint64_t send_counts(Collective c, int nranks) {
  return c == Collective::ReduceScatter || c == Collective::AllToAll ? static_cast<uint64_t>(nranks) : 1;
}

/// How many counts each rank's receive buffer holds: nranks for AllGather and AllToAll, one
/// for the others.
constexpr uint64_t recv_counts(Collective c, int nranks) {
  return c == Collective::AllGather || c == Collective::AllToAll ? static_cast<uint64_t>(nranks) : 1;
}

}  // namespace weft
