#include "runtime/selection.hpp"

#include <algorithm>

#include "runtime/builtin_plans.hpp"
#include "runtime/plan_source.hpp"
#include "util/text.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

/// Instances so that each thread block moves about `per_instance` bytes, within [lo, hi].
int instances_for(uint64_t bytes, uint64_t per_instance, int lo, int hi) {
  uint64_t n = bytes / per_instance;
  return static_cast<int>(std::clamp<uint64_t>(n, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)));
}

}  // namespace

Choice table_choice(Collective c, uint64_t bytes, int nranks) {
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

Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances) {
  Choice ch = table_choice(c, bytes, nranks);
  // WEFT_ALGO: comma-separated entries, each "name" or "Collective:name". A name is a
  // built-in plan ("ring", "allpairs", "chain"), an algorithm of algorithms/ or a file; a
  // bare name applies to the collectives it implements.
  std::string algo = config::get_string("WEFT_ALGO");
  for (const std::string& raw : text::split(algo, ',')) {
    std::string entry(text::trim(raw));
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon != std::string::npos) {
      auto coll = collective_from_string(entry.substr(0, colon));
      if (!coll) fail(ErrorCode::InvalidArgument, "WEFT_ALGO entry '" + entry + "' names no collective");
      if (*coll == c) ch.algorithm = entry.substr(colon + 1);
      continue;
    }
    auto names = builtin_plan_algorithms(c);
    if (std::find(names.begin(), names.end(), entry) != names.end()) ch.algorithm = entry;
    else if (!is_builtin_plan_name(entry) && algorithm_collective(entry, nranks) == c) ch.algorithm = entry;
  }
  std::string proto = config::get_string("WEFT_PROTO");
  if (!proto.empty()) {
    if (proto != "Simple" && proto != "LL")
      fail(ErrorCode::InvalidArgument, "WEFT_PROTO='" + proto + "' is not Simple or LL");
    ch.protocol = proto;
  }
  int64_t inst = config::get_int("WEFT_INSTANCES");
  if (inst > 0) ch.instances = static_cast<int>(inst);
  ch.instances = std::clamp(ch.instances, 1, std::max(1, max_instances));
  return ch;
}

}  // namespace weft
