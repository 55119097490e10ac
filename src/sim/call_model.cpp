#include "sim/call_model.hpp"

#include <algorithm>

#include "plan/algorithms.hpp"

namespace weft::sim {

double call_overhead_us(bool graph, const CallCosts& k) { return graph ? k.graph_launch_us : k.launch_us; }

bool oneshot_carries(Collective c, uint64_t bytes, int32_t ranks) {
  return algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, bytes, ranks, false});
}

double oneshot_time_us(Collective c, uint64_t bytes, int32_t ranks, bool graph, const CallCosts& k) {
  const double wire = 2.0 * static_cast<double>(std::max(1, ranks - 1)) * static_cast<double>(algo::peer_bytes(c, bytes, ranks));
  return call_overhead_us(graph, k) + k.oneshot_exchange_us + wire / (k.oneshot_GBps * 1e3);
}

}  // namespace weft::sim
