#include "tune/selection.hpp"

#include "tune/decide.hpp"

namespace weft {

uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks) { return algo::peer_bytes(c, bytes, nranks); }

bool oneshot_fits(Collective c, uint64_t bytes, int nranks) {
  return algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, bytes, nranks, false});
}

int oneshot_blocks(uint64_t peer_bytes) { return algo::oneshot_blocks(peer_bytes); }

Choice table_choice(Collective c, uint64_t bytes, int nranks, bool in_place) {
  return default_selection_table().choose(c, bytes, nranks, in_place);
}

Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances, bool in_place) {
  return select_algorithm(default_selection_table(), c, bytes, nranks, max_instances, in_place);
}

Choice select_algorithm(const SelectionTable& table, Collective c, uint64_t bytes, int nranks, int max_instances,
                        bool in_place) {
  CommShape shape;
  shape.nranks = nranks;
  shape.connections = max_instances;
  // The table outlives the Decider, which lives for this call only.
  const Decider d(std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &table), shape,
                  DecideEnv::from_environment());
  return to_choice(d.chosen(Call{c, bytes, in_place}));
}

std::string effective_protocol(const std::string& chosen, bool net, uint64_t slot_bytes, uint64_t ll_slot_bytes,
                               std::string* why) {
  const auto p = algo::protocol_from_string(chosen);
  if (!p) return chosen;
  ProtocolNote note = ProtocolNote::None;
  const algo::Protocol eff = effective_protocol(*p, net, slot_bytes, ll_slot_bytes, &note);
  if (note == ProtocolNote::None) return chosen;
  if (why != nullptr) *why = describe(note, *p, slot_bytes, ll_slot_bytes);
  return std::string(algo::to_string(eff));
}

}  // namespace weft
