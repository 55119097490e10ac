// The per-call rule as weft coded it before decide() (main 2578b20), frozen here in names:
// SelectionTable::choose and select_algorithm (then src/runtime/selection*.cpp), the
// re-choice of Communicator::collective for the copy engines and the network
// (runtime/collectives.cpp), effective_protocol, Communicator::uses_gen and the micro-batch.
// It reads the environment from a struct instead of the process's, and knows the one-shot
// kernel's and the copy engines' limits as literals, so that it shares no code with decide()
// but the table's parsed strings, the plan builder's lists and algorithm_collective.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "plan/hand_built.hpp"
#include "plan/oneshot_limits.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::old_rule {

struct Env {
  std::string algo, proto;
  int64_t instances = 0, microbatch = 0;
  bool gen = false;  ///< WEFT_EXECUTOR=gen
  bool any() const { return !algo.empty() || !proto.empty() || instances != 0 || microbatch != 0; }
};

struct Shape {
  int nranks = 1;
  bool net = false;
  int connections = 32;
  uint64_t slot = 512 << 10, ll_slot = 64 << 10;
};

/// One launch in names: what ran ("oneshot", "ce" or a plan), its choice, whether a generated
/// kernel runs it, and the micro-batch target.
struct Launch {
  Choice ch;
  bool gen = false;
  uint64_t mb = 0;
};
struct Result {
  Launch run;
  bool has_fallback = false;  ///< ce: what runs where a rank cannot use the copy engines
  Launch fallback;
};

// The one-shot kernel's collectives: AllReduce, AllGather and ReduceScatter when this rule was
// frozen (and still what a bare WEFT_ALGO=oneshot and the tables' rows cover); issue 32
// (h/latency) added Broadcast and Reduce where WEFT_ALGO names it for them
// ("Broadcast:oneshot"), and their payload per peer is the whole payload; session 9 added
// AllToAll ("AllToAll:oneshot", a block per peer). The kernel's capacity is not the rule's: it
// comes from plan/oneshot_limits.hpp (512 KiB per peer and 32 blocks when the rule was frozen,
// 1 MiB and 64 since).
inline bool oneshot_collective(Collective c) {
  return c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
}
inline bool oneshot_carries(Collective c) {
  return oneshot_collective(c) || c == Collective::Broadcast || c == Collective::Reduce || c == Collective::AllToAll;
}
inline uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks) {
  const bool whole = c == Collective::AllReduce || c == Collective::Broadcast || c == Collective::Reduce;
  return whole ? bytes : bytes / static_cast<uint64_t>(std::max(1, nranks));
}
inline bool oneshot_fits(Collective c, uint64_t bytes, int nranks) {
  return oneshot_carries(c) && nranks >= 2 && nranks <= 8 && peer_bytes(c, bytes, nranks) <= exec::kOneShotMaxBytes;
}
inline int oneshot_blocks(uint64_t peer) {
  const uint64_t words = (peer + 7) / 8;
  uint64_t b = std::min<uint64_t>((words + 511) / 512, 16);
  b = std::max<uint64_t>(b, (words + 2047) / 2048);
  return static_cast<int>(std::clamp<uint64_t>(b, 1, static_cast<uint64_t>(exec::kOneShotBlocks)));
}
inline bool is_hand_built(const std::string& a) { return a == "ring" || a == "allpairs" || a == "chain"; }
// The copy engines' collectives: AllGather and AllReduce when this rule was frozen; memory
// windows (h/windows, whose selection.cpp asked ce::supports) added AllToAll and Broadcast.
inline bool ce_supports(Collective c) {
  return c == Collective::AllGather || c == Collective::AllReduce || c == Collective::AllToAll ||
         c == Collective::Broadcast;
}

inline Choice choose(const SelectionTable& t, Collective c, uint64_t bytes, int nranks, bool in_place, bool plans_only) {
  const uint64_t peer = peer_bytes(c, bytes, nranks);
  const uint64_t sent = static_cast<uint64_t>(std::max(0, nranks - 1)) * peer;
  for (const SelectionRow& r : t.rows) {
    if (std::find(r.collectives.begin(), r.collectives.end(), c) == r.collectives.end()) continue;
    if (!r.ranks.contains(static_cast<uint64_t>(nranks)) || !r.bytes.contains(bytes) || !r.sent_bytes.contains(sent))
      continue;
    if (r.placement >= 0 && r.placement != (in_place ? 1 : 0)) continue;
    if (r.algorithm == "ce" && plans_only) continue;
    if (r.algorithm == "oneshot") {
      if (plans_only || !oneshot_fits(c, bytes, nranks)) continue;
      return Choice{"oneshot", "LL", oneshot_blocks(peer)};
    }
    Choice ch;
    ch.algorithm = r.algorithm;
    ch.protocol = r.protocol;
    ch.instances = r.per_bytes == 0 ? r.min
                                    : static_cast<int>(std::clamp<uint64_t>(bytes / r.per_bytes, static_cast<uint64_t>(r.min),
                                                                            static_cast<uint64_t>(r.max)));
    ch.scheduler = r.scheduler;
    ch.allocator = r.allocator;
    ch.microbatch_bytes = r.microbatch_bytes;
    ch.executor = r.executor;
    return ch;
  }
  fail(ErrorCode::InvalidUsage, "no row");
}

inline Choice select(const SelectionTable& t, Collective c, uint64_t bytes, int nranks, int max_instances, bool in_place,
                     const Env& env) {
  auto plan_choice = [&] { return choose(t, c, bytes, nranks, in_place, true); };
  Choice ch = choose(t, c, bytes, nranks, in_place, false);
  std::string named;
  for (const std::string& raw : text::split(env.algo, ',')) {
    std::string entry(text::trim(raw));
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon != std::string::npos) {
      auto coll = collective_from_string(entry.substr(0, colon));
      if (!coll) fail(ErrorCode::InvalidArgument, "WEFT_ALGO entry '" + entry + "' names no collective");
      if (*coll == c) named = entry.substr(colon + 1);
      continue;
    }
    if (entry == "oneshot") {
      if (oneshot_collective(c)) named = entry;
      continue;
    }
    if (entry == "ce") {
      if (ce_supports(c) && nranks <= 8) named = entry;
      continue;
    }
    auto names = hand_built_algorithms(c);
    if (std::find(names.begin(), names.end(), entry) != names.end()) named = entry;
    else if (!is_hand_built(entry) && algorithm_collective(entry, nranks) == c) named = entry;
  }
  const bool named_oneshot = named == "oneshot";
  if (named_oneshot && ch.algorithm != "oneshot") {
    ch = Choice{"oneshot", "LL", oneshot_blocks(peer_bytes(c, bytes, nranks))};
  } else if (!named.empty() && !named_oneshot) {
    if (ch.algorithm == "oneshot") ch = plan_choice();
    ch.algorithm = named;
  }
  const std::string& proto = env.proto;
  if (!proto.empty() && proto != "Simple" && proto != "LL" && proto != "LL128")
    fail(ErrorCode::InvalidArgument, "WEFT_PROTO='" + proto + "' is not Simple, LL or LL128");
  if (ch.algorithm == "oneshot" &&
      (!oneshot_fits(c, bytes, nranks) || ((proto == "Simple" || proto == "LL128") && !named_oneshot)))
    ch = plan_choice();
  if (!proto.empty() && ch.algorithm != "oneshot") ch.protocol = proto;
  if (env.instances > 0) ch.instances = static_cast<int>(env.instances);
  ch.instances = std::clamp(ch.instances, 1, std::max(1, max_instances));
  return ch;
}

/// A plan launch's protocol, executor and micro-batch, as the communicator set them.
inline Launch finish(Choice ch, const Shape& s, const Env& env) {
  Launch l;
  if (ch.algorithm != "oneshot" && ch.protocol != "Simple") {
    if (s.net) ch.protocol = "Simple";
    else if (ch.protocol == "LL128" && (s.slot % 128 != 0 || s.ll_slot % 128 != 0)) ch.protocol = "Simple";
  }
  const bool gen_default = env.gen && !s.net;
  l.gen = !(s.net || ch.protocol == "LL128") && (ch.executor.empty() ? gen_default : ch.executor == "gen");
  l.mb = env.any() && env.microbatch > 0 ? static_cast<uint64_t>(env.microbatch) : ch.microbatch_bytes;
  l.ch = ch;
  return l;
}

/// Communicator::collective's choice for one call (nranks > 1 there; any count here).
inline Result per_call(const SelectionTable& t, const Shape& s, const Env& env, Collective c, uint64_t payload,
                       bool in_place) {
  Result res;
  Choice ch = env.any() ? select(t, c, payload, s.nranks, s.connections, in_place, env)
                        : choose(t, c, payload, s.nranks, in_place, false);
  if (ch.algorithm == "ce") {
    const Choice plans = choose(t, c, payload, s.nranks, in_place, true);
    // run_copy_engine declined at once, on every rank, for another collective or rank count.
    if (!s.net && ce_supports(c) && s.nranks >= 2 && s.nranks <= 8) {
      res.run.ch = ch;
      res.has_fallback = true;
      res.fallback = finish(plans, s, env);
      return res;
    }
    ch = plans;
  }
  if (s.net && ch.algorithm == "oneshot") {
    ch = choose(t, c, payload, s.nranks, in_place, true);
    const int64_t inst = env.any() ? env.instances : 0;
    if (inst > 0) ch.instances = static_cast<int>(std::min<int64_t>(inst, s.connections));
  }
  if (ch.algorithm == "oneshot") {
    res.run.ch = ch;
    return res;
  }
  res.run = finish(ch, s, env);
  return res;
}

}  // namespace weft::old_rule
