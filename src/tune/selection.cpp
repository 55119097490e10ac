#include "tune/selection.hpp"

#include <algorithm>

#include "exec/oneshot.hpp"
#include "weft/device/packet.hpp"
#include "runtime/builtin_plans.hpp"
#include "runtime/ce_plan.hpp"
#include "runtime/plan_source.hpp"
#include "util/text.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

bool oneshot_collective(Collective c) {
  return c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
}

}  // namespace

uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks) {
  return c == Collective::AllReduce ? bytes : bytes / static_cast<uint64_t>(std::max(1, nranks));
}

bool oneshot_fits(Collective c, uint64_t bytes, int nranks) {
  return oneshot_collective(c) && nranks >= 2 && nranks <= exec::kOneShotMaxRanks &&
         peer_bytes(c, bytes, nranks) <= exec::kOneShotMaxBytes;
}

int oneshot_blocks(uint64_t peer_bytes) {
  const uint64_t words = (peer_bytes + 7) / 8;
  const uint64_t per_block_max = static_cast<uint64_t>(exec::kOneShotThreads) * exec::kOneShotWordsPerThread;
  uint64_t b = std::min<uint64_t>((words + exec::kOneShotThreads - 1) / exec::kOneShotThreads, 16);
  b = std::max<uint64_t>(b, (words + per_block_max - 1) / per_block_max);
  return static_cast<int>(std::clamp<uint64_t>(b, 1, exec::kOneShotBlocks));
}

Choice table_choice(Collective c, uint64_t bytes, int nranks, bool in_place) {
  return default_selection_table().choose(c, bytes, nranks, in_place);
}

Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances, bool in_place) {
  return select_algorithm(default_selection_table(), c, bytes, nranks, max_instances, in_place);
}

Choice select_algorithm(const SelectionTable& table, Collective c, uint64_t bytes, int nranks, int max_instances,
                        bool in_place) {
  // The table's choice among plans: what runs when the one-shot kernel does not.
  auto plan_choice = [&] { return table.choose(c, bytes, nranks, in_place, true); };
  Choice ch = table.choose(c, bytes, nranks, in_place);
  // WEFT_ALGO: comma-separated entries, each "name" or "Collective:name". A name is a
  // built-in plan ("ring", "allpairs", "chain"), "oneshot", an algorithm of algorithms/ or
  // a file; a bare name applies to the collectives it implements. The last match wins.
  std::string algo = config::get_string("WEFT_ALGO");
  std::string named;
  for (const std::string& raw : text::split(algo, ',')) {
    std::string entry(text::trim(raw));
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon != std::string::npos) {
      auto coll = collective_from_string(entry.substr(0, colon));
      if (!coll) fail(ErrorCode::InvalidArgument, "WEFT_ALGO entry '" + entry + "' names no collective");
      if (*coll == c) named = entry.substr(colon + 1);
      continue;
    }
    if (entry == kOneShot) {
      if (oneshot_collective(c)) named = entry;
      continue;
    }
    if (entry == ce::kAlgorithm) {  // copy engines: AllGather and AllReduce only
      if (ce::supports(c) && nranks <= ce::kMaxRanks) named = entry;
      continue;
    }
    auto names = builtin_plan_algorithms(c);
    if (std::find(names.begin(), names.end(), entry) != names.end()) named = entry;
    else if (!is_builtin_plan_name(entry) && algorithm_collective(entry, nranks) == c) named = entry;
  }
  const bool named_oneshot = named == kOneShot;
  if (named_oneshot && ch.algorithm != kOneShot) {
    ch = Choice{kOneShot, "LL", oneshot_blocks(peer_bytes(c, bytes, nranks))};
  } else if (!named.empty() && !named_oneshot) {
    if (ch.algorithm == kOneShot) ch = plan_choice();
    ch.algorithm = named;
  }
  std::string proto = config::get_string("WEFT_PROTO");
  if (!proto.empty() && proto != "Simple" && proto != "LL" && proto != "LL128")
    fail(ErrorCode::InvalidArgument, "WEFT_PROTO='" + proto + "' is not Simple, LL or LL128");
  // The one-shot kernel is LL by nature: a forced Simple or LL128 sends the table's oneshot
  // to the plans, as does a payload the kernel cannot hold.
  if (ch.algorithm == kOneShot &&
      (!oneshot_fits(c, bytes, nranks) || ((proto == "Simple" || proto == "LL128") && !named_oneshot)))
    ch = plan_choice();
  if (!proto.empty() && ch.algorithm != kOneShot) ch.protocol = proto;
  int64_t inst = config::get_int("WEFT_INSTANCES");
  if (inst > 0) ch.instances = static_cast<int>(inst);
  ch.instances = std::clamp(ch.instances, 1, std::max(1, max_instances));
  return ch;
}

std::string effective_protocol(const std::string& chosen, bool net, uint64_t slot_bytes, uint64_t ll_slot_bytes,
                               std::string* why) {
  std::string reason;
  if (chosen != "Simple" && net)
    reason = chosen + " runs as Simple across the network (it needs a packet's or line's data and flag to land together)";
  else if (chosen == "LL128" && (slot_bytes % device::kLL128LineBytes != 0 || ll_slot_bytes % device::kLL128LineBytes != 0))
    reason = "LL128 runs as Simple: WEFT_SLOT_BYTES (" + std::to_string(slot_bytes) + ") and WEFT_LL_SLOT_BYTES (" +
             std::to_string(ll_slot_bytes) + ") must be multiples of 128 for its lines to start on line boundaries";
  if (reason.empty()) return chosen;
  if (why != nullptr) *why = reason;
  return "Simple";
}

}  // namespace weft
