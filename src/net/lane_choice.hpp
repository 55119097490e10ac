// How many lanes (net/ucx_lanes.hpp) the UCX transport runs: WEFT_NET_LANES given (every rank
// must give the same count) or chosen (-1, the default) from what every rank tells the
// others in the worker-address exchange: the CPUs it may run on and the machine it runs on.
//
// The chosen count is the smallest, over the ranks, of
//   auto_lanes(cpus, ranks on that machine) = min(8, cpus / ranks - 2), 0 when below 2,
// so each rank keeps a CPU for its own thread and one for its proxy, and the lanes take the
// rest of its share. Every rank computes it from the same blocks, so all agree. Measured on
// the GPU machine (16 CPUs, UCX 1.16 over TCP, docs/port-channels.md "Lanes chosen from the
// CPUs"): net_bench fifos 3.0 GB/s each way with no lane, 7.3 with 4, 9.0 with 8; on this
// project's 2-core machine lanes were slower, and the rule gives 0 there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::net {

/// Lanes WEFT_NET_LANES=-1 picks at the most (12 and 16 measured slower than 8 on 16 CPUs).
constexpr int kAutoLanesMax = 8;

/// One rank's part of the choice, as it travels in its worker-address block.
struct LaneOffer {
  bool automatic = false;  ///< WEFT_NET_LANES=-1 on that rank
  uint32_t lanes = 0;      ///< the count it was given (automatic: 0)
  uint64_t machine = 0;    ///< its machine (the kernel it runs on, not WEFT_HOST_ID)
  uint32_t cpus = 0;       ///< CPUs its affinity mask allows
};

/// The lanes a rank may run with `cpus` CPUs shared by `ranks_here` ranks.
int auto_lanes(uint32_t cpus, int ranks_here);

/// The count every rank runs, from every rank's offer (`offers[r]` is rank r's; `me` is the
/// caller, for messages). Throws InvalidUsage naming WEFT_NET_LANES where ranks give
/// different counts, or some choose and others do not.
int agree_lanes(const std::vector<LaneOffer>& offers, int me);

/// This process's offer for WEFT_NET_LANES=`configured` (-1: choose).
LaneOffer local_lane_offer(int64_t configured);

/// What `weft env` and the NET log say about the choice on this process.
std::string describe_lane_rule(int64_t configured);

}  // namespace weft::net
