#include "net/lane_choice.hpp"

#include <sched.h>

#include <algorithm>
#include <map>

#include "bootstrap/host_identity.hpp"
#include "util/error.hpp"

namespace weft::net {

int auto_lanes(uint32_t cpus, int ranks_here) {
  if (ranks_here < 1) ranks_here = 1;
  const int64_t share = static_cast<int64_t>(cpus) / ranks_here - 2;
  return share < 2 ? 0 : static_cast<int>(std::min<int64_t>(share, kAutoLanesMax));
}

int agree_lanes(const std::vector<LaneOffer>& offers, int me) {
  if (offers.empty()) return 0;
  const std::string who = "rank " + std::to_string(me);
  const LaneOffer& mine = offers[static_cast<size_t>(std::clamp<int>(me, 0, static_cast<int>(offers.size()) - 1))];
  auto shown = [](const LaneOffer& o) { return o.automatic ? std::string("WEFT_NET_LANES=-1 (chosen)") : std::to_string(o.lanes) + " network lanes"; };
  for (size_t r = 0; r < offers.size(); ++r) {
    const LaneOffer& o = offers[r];
    if (o.automatic != mine.automatic || (!o.automatic && o.lanes != mine.lanes))
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(r) + " runs " + shown(o) + ", " + who + " " + shown(mine) +
                                        ": set WEFT_NET_LANES alike on every rank");
  }
  if (!mine.automatic) return static_cast<int>(mine.lanes);
  std::map<uint64_t, int> ranks_on;
  for (const LaneOffer& o : offers) ++ranks_on[o.machine];
  int lanes = kAutoLanesMax;
  for (const LaneOffer& o : offers) lanes = std::min(lanes, auto_lanes(o.cpus, ranks_on[o.machine]));
  return lanes;
}

namespace {
uint32_t allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<uint32_t>(std::max(1, CPU_COUNT(&set)));
}
}  // namespace

LaneOffer local_lane_offer(int64_t configured) {
  LaneOffer o;
  o.automatic = configured < 0;
  o.lanes = o.automatic ? 0 : static_cast<uint32_t>(configured);
  o.machine = local_machine_key();
  o.cpus = allowed_cpus();
  return o;
}

std::string describe_lane_rule(int64_t configured) {
  if (configured >= 0) return std::to_string(configured) + " (WEFT_NET_LANES)";
  return "chosen at creation (WEFT_NET_LANES=-1): the smallest over the ranks of min(" + std::to_string(kAutoLanesMax) +
         ", CPUs / ranks on the machine - 2), 0 below 2; this process may use " + std::to_string(allowed_cpus()) + " CPUs";
}

}  // namespace weft::net
