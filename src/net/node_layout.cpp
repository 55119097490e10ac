#include "net/node_layout.hpp"

#include <map>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::net {

NodeLayout node_layout(const std::vector<uint64_t>& host_of_rank, int emulate_nodes) {
  if (emulate_nodes < 0) fail(ErrorCode::InvalidArgument, "WEFT_EMULATE_NODES=" + std::to_string(emulate_nodes) + " is negative");
  const int split = emulate_nodes < 1 ? 1 : emulate_nodes;
  // Hosts in order of their first rank; each host's ranks in rank order.
  std::vector<uint64_t> hosts;
  std::map<uint64_t, std::vector<int>> ranks_of;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    auto [it, fresh] = ranks_of.try_emplace(host_of_rank[r]);
    if (fresh) hosts.push_back(host_of_rank[r]);
    it->second.push_back(static_cast<int>(r));
  }
  NodeLayout out;
  out.node_of_rank.assign(host_of_rank.size(), -1);
  for (size_t h = 0; h < hosts.size(); ++h) {
    const std::vector<int>& ranks = ranks_of[hosts[h]];
    const size_t k = ranks.size();
    if (k < static_cast<size_t>(split))
      fail(ErrorCode::InvalidArgument, "WEFT_EMULATE_NODES=" + std::to_string(split) + " needs at least " +
                                           std::to_string(split) + " ranks on every host; host " + std::to_string(h) +
                                           " (with rank " + std::to_string(ranks.front()) + ") has " + std::to_string(k));
    for (size_t i = 0; i < k; ++i)
      out.node_of_rank[static_cast<size_t>(ranks[i])] = out.nodes + static_cast<int>(i * static_cast<size_t>(split) / k);
    out.nodes += split;
  }
  out.emulated = split > 1;
  return out;
}

NodeLayout node_layout(const std::vector<uint64_t>& host_of_rank) {
  return node_layout(host_of_rank, static_cast<int>(config::get_int("WEFT_EMULATE_NODES")));
}

}  // namespace weft::net
