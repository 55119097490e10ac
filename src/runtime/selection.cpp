#include "runtime/selection.hpp"

#include <algorithm>

#include "device/oneshot.hpp"
#include "runtime/builtin_plans.hpp"
#include "runtime/plan_source.hpp"
#include "util/text.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

constexpr uint64_t KiB = 1024;

/// Instances so that each thread block moves about `per_instance` bytes, within [lo, hi].
int instances_for(uint64_t bytes, uint64_t per_instance, int lo, int hi) {
  uint64_t n = bytes / per_instance;
  return static_cast<int>(std::clamp<uint64_t>(n, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)));
}

bool oneshot_collective(Collective c) {
  return c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
}

/// Payload bytes per rank and peer: AllGather's output and ReduceScatter's input hold one
/// such part per rank.
uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks) {
  return c == Collective::AllReduce ? bytes : bytes / static_cast<uint64_t>(std::max(1, nranks));
}

/// Whether the table prefers the one-shot kernel to a plan: while each rank sends at most
/// 512 KiB in all ((R - 1) x the payload per peer, 1 MiB of packets). One hop and one
/// launch win while the links are far from full: on nvidia-h200-x2 (2 ranks) the kernel
/// ran AllReduce in 5 to 9 us up to 512 KiB where the plans took 8 to 16 us, and
/// AllGather/ReduceScatter of 1 MiB in 8 to 9 us against 15 to 17 (2026-11-22). Its traffic
/// grows with the rank count (for AllReduce, R - 1 times the payload per rank against
/// about twice for a ring), hence the limit on the total.
bool oneshot_preferred(Collective c, uint64_t bytes, int nranks) {
  return static_cast<uint64_t>(nranks - 1) * peer_bytes(c, bytes, nranks) <= 512 * KiB;
}

/// The table's choice among plans (what runs when the one-shot kernel does not).
Choice plan_choice(Collective c, uint64_t bytes, int nranks) {
  Choice ch;
  const bool small = bytes <= 128 * KiB;
  // LL for small messages (latency): one thread block per instance moves about 8 KiB, in
  // one batch of packets per thread. Simple for larger ones (bandwidth): enough thread
  // blocks to fill NVLink (each moves about 20 GB/s to a peer), 24 from 768 KiB on.
  if (small) {
    ch.protocol = "LL";
    ch.instances = instances_for(bytes, 8 * KiB, 1, 16);
  } else {
    ch.protocol = "Simple";
    ch.instances = instances_for(bytes, 32 * KiB, 4, 24);
  }
  switch (c) {
    case Collective::AllReduce:
    case Collective::AllGather:
    case Collective::ReduceScatter:
      // All-pairs sends each rank's data straight to every peer: latency-optimal, and for
      // two ranks it moves exactly what a ring moves, with dedicated sender and receiver
      // blocks pipelined over micro-batches. Rings win from three ranks on for large data.
      ch.algorithm = small || nranks <= 2 ? "allpairs" : "ring";
      break;
    case Collective::Broadcast:
    case Collective::Reduce:
      ch.algorithm = nranks > 2 && !small ? "chain" : "allpairs";
      break;
    default:
      ch.algorithm = "allpairs";
      break;
  }
  return ch;
}

}  // namespace

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

Choice table_choice(Collective c, uint64_t bytes, int nranks) {
  if (oneshot_fits(c, bytes, nranks) && oneshot_preferred(c, bytes, nranks))
    return Choice{kOneShot, "LL", oneshot_blocks(peer_bytes(c, bytes, nranks))};
  return plan_choice(c, bytes, nranks);
}

Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances) {
  Choice ch = table_choice(c, bytes, nranks);
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
    auto names = builtin_plan_algorithms(c);
    if (std::find(names.begin(), names.end(), entry) != names.end()) named = entry;
    else if (!is_builtin_plan_name(entry) && algorithm_collective(entry, nranks) == c) named = entry;
  }
  const bool named_oneshot = named == kOneShot;
  if (named_oneshot && ch.algorithm != kOneShot) {
    ch = Choice{kOneShot, "LL", oneshot_blocks(peer_bytes(c, bytes, nranks))};
  } else if (!named.empty() && !named_oneshot) {
    if (ch.algorithm == kOneShot) ch = plan_choice(c, bytes, nranks);
    ch.algorithm = named;
  }
  std::string proto = config::get_string("WEFT_PROTO");
  if (!proto.empty() && proto != "Simple" && proto != "LL")
    fail(ErrorCode::InvalidArgument, "WEFT_PROTO='" + proto + "' is not Simple or LL");
  // The one-shot kernel is LL by nature: a forced Simple sends the table's oneshot to the
  // plans, as does a payload the kernel cannot hold.
  if (ch.algorithm == kOneShot &&
      (!oneshot_fits(c, bytes, nranks) || (proto == "Simple" && !named_oneshot)))
    ch = plan_choice(c, bytes, nranks);
  if (!proto.empty() && ch.algorithm != kOneShot) ch.protocol = proto;
  int64_t inst = config::get_int("WEFT_INSTANCES");
  if (inst > 0) ch.instances = static_cast<int>(inst);
  ch.instances = std::clamp(ch.instances, 1, std::max(1, max_instances));
  return ch;
}

}  // namespace weft
