#include "sim/call_model.hpp"

#include <algorithm>

#include "plan/oneshot_limits.hpp"

namespace weft::sim {

namespace {

uint64_t per_peer(Collective c, uint64_t bytes, int32_t ranks) {
  return c == Collective::AllReduce ? bytes : bytes / static_cast<uint64_t>(std::max(1, ranks));
}

}  // namespace

double call_overhead_us(bool graph, const CallCosts& k) { return graph ? k.graph_launch_us : k.launch_us; }

bool oneshot_carries(Collective c, uint64_t bytes, int32_t ranks) {
  const bool kind = c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
  return kind && ranks >= 2 && ranks <= exec::kOneShotMaxRanks && per_peer(c, bytes, ranks) <= exec::kOneShotMaxBytes;
}

double oneshot_time_us(Collective c, uint64_t bytes, int32_t ranks, bool graph, const CallCosts& k) {
  const double wire = 2.0 * static_cast<double>(std::max(1, ranks - 1)) * static_cast<double>(per_peer(c, bytes, ranks));
  return call_overhead_us(graph, k) + k.oneshot_exchange_us + wire / (k.oneshot_GBps * 1e3);
}

}  // namespace weft::sim
