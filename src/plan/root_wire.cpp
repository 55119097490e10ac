#include "plan/root_wire.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace weft {

namespace {

/// (send?, peer, channel, instance): one connection end of the root.
using EndKey = std::tuple<bool, int32_t, int32_t, int32_t>;
/// (chunk slots, instances) of each message on the end, in slot order.
using Messages = std::vector<std::pair<int32_t, int32_t>>;

std::map<EndKey, Messages> root_ends(const Plan& p, int root) {
  std::map<EndKey, Messages> ends;
  if (root < 0 || root >= static_cast<int>(p.ranks.size())) return ends;
  for (const ThreadBlock& tb : p.ranks[static_cast<size_t>(root)].tbs)
    for (const Slot& s : tb.slots) {
      if (primitive_sends(s.primitive)) ends[{true, s.send_peer, s.channel, s.instance}].push_back({s.count, s.instances});
      if (primitive_receives(s.primitive))
        ends[{false, s.recv_peer, s.channel, s.instance}].push_back({s.count, s.instances});
    }
  return ends;
}

std::set<std::pair<int32_t, int32_t>> message_shapes(const Plan& p) {
  std::set<std::pair<int32_t, int32_t>> shapes;
  for (const RankPlan& rp : p.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots)
        if (primitive_sends(s.primitive)) shapes.insert({s.count, s.instances});
  return shapes;
}

std::string describe(const EndKey& k, int root) {
  const auto& [send, peer, channel, instance] = k;
  return std::string(send ? "sends to" : "receives from") + " rank " + std::to_string(peer) + " on channel " +
         std::to_string(channel) + ", instance " + std::to_string(instance) + " (root " + std::to_string(root) + ")";
}

}  // namespace

std::string root_wire_difference(const Plan& in_place, const Plan& out_of_place, int root) {
  if (in_place.execution != out_of_place.execution) return "the plans have different execution models";
  if (in_place.input_chunks != out_of_place.input_chunks || in_place.output_chunks != out_of_place.output_chunks)
    return "the plans cut the buffers into different chunk slots (input " + std::to_string(in_place.input_chunks) +
           " vs " + std::to_string(out_of_place.input_chunks) + ", output " + std::to_string(in_place.output_chunks) +
           " vs " + std::to_string(out_of_place.output_chunks) + ")";
  if (message_shapes(in_place) != message_shapes(out_of_place))
    return "the plans' messages have different shapes (so different micro-batches)";
  const auto a = root_ends(in_place, root), b = root_ends(out_of_place, root);
  for (const auto& [key, msgs] : a) {
    auto it = b.find(key);
    if (it == b.end()) return "in place the root " + describe(key, root) + ", out of place it does not";
    if (it->second != msgs)
      return "the root " + describe(key, root) + " " + std::to_string(msgs.size()) + " messages in place, " +
             std::to_string(it->second.size()) + " of other shapes or number out of place";
  }
  for (const auto& [key, msgs] : b)
    if (a.find(key) == a.end()) return "out of place the root " + describe(key, root) + ", in place it does not";
  return "";
}

int max_message_instances(const Plan& p) {
  int most = 1;
  for (const auto& [count, instances] : message_shapes(p)) most = std::max(most, static_cast<int>(instances));
  return most;
}

}  // namespace weft
