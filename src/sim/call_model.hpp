// What a call costs beyond its plan, and the one-shot kernel, which runs no plan: the
// simulator's model of small messages (docs/cost-model.md, "Small messages").
//
// The engine times a plan from its first block's start to its last block's end. A call as
// `weft bench` times it (back-to-back calls on one stream, or replays of a CUDA graph of
// them) also pays the launch: CallCosts::launch_us per plain call, graph_launch_us inside a
// graph. The one-shot kernel (exec/oneshot.hpp) is one launch, one exchange of LL packets
// with every peer, and the packets' bytes at the rate one GPU writes them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/algorithm.hpp"
#include "plan/algorithms.hpp"
#include "sim/report.hpp"

namespace weft::sim {

struct SimOptions;

/// Measured figures (docs/cost-model.md, "Small messages", says where each comes from).
struct CallCosts {
  /// One plain call's floor, launch to completion, on 2 x H100 NV18 (issue 17).
  double launch_us = 3.9;
  /// The same per call replayed inside a CUDA graph (issue 17).
  double graph_launch_us = 1.55;
  /// The one-shot kernel over its launch: one round of LL packets to every peer, polled
  /// (AllReduce of 8 B on nvidia-h200-x2: 5.2 us per plain call, 3.05 us in a graph).
  double oneshot_exchange_us = 1.4;
  /// LL packet bytes (16 per 8 data bytes) one GPU writes to its peers per microsecond x
  /// 1e-3 (GB/s): AllReduce of 512 KiB took 3.5 us more than 8 B (8.7 against 5.2 us).
  double oneshot_GBps = 300;
  /// The ten figures below are fitted (scripts/fit_calibration.py, each protocol's figures
  /// searched together) to the Simple, LL and LL128 candidates `weft tune` timed on 4 x H200
  /// at 256 KiB, 16 MiB and 128 MiB (round 5 call 4, tests/data/calibration/tune-h200x4.csv);
  /// its 2 MiB rows and every 2-GPU row (bench-h200x2.csv) are held out (docs/cost-model.md,
  /// "Calibration against weft tune"). A step of the runtime's interpreter costs about the
  /// same in every protocol (its waits, barriers and counter updates): 4.5 us for Simple (1 +
  /// 3.5), 4.25 for LL, 5 for LL128; the hop latencies differ.
  /// LL plans: each step's alpha (the presets' 1 us) scales by this.
  double ll_alpha_scale = 4.25;
  /// LL plans: the latency of a hop (the presets' 2 us) scales by this: the receiver polls
  /// the packets as they land, with no post to wait for (1 us).
  double ll_latency_scale = 0.5;
  /// LL plans: packets carry 8 data bytes in 16, and a block polls every packet: its rate,
  /// sending and receiving, is this x tb_copy_GBps (14 GB/s on the H200 presets' 20).
  double ll_rate_scale = 0.7;
  /// Simple plans as the runtime runs them: each invocation's alpha over the presets'
  /// (assumed) 1 us, for its two barriers and system-scope fence per micro-batch.
  double simple_alpha_extra_us = 3.5;
  /// Simple plans as the runtime runs them: a thread block's rate over the presets'
  /// tb_copy_GBps (the figure the compiler and `weft simulate` keep): 32 GB/s on the H200
  /// presets' 20.
  double simple_rate_scale = 1.6;
  /// Simple plans as the runtime runs them: a block's local work (copying or reducing a
  /// landed message out of staging, a local copy) at tb_local_GBps x this (100 GB/s of HBM
  /// traffic on the H200 presets' 80, an assumed figure): with 1.0 a Reduce's root took
  /// longer to reduce each landed message than its peer took to send it, and the 2-GPU
  /// allpairs AllReduce with 8 instances came out 16% slow.
  double simple_local_rate_scale = 1.25;
  /// LL128 plans: each step's alpha scales by this.
  double ll128_alpha_scale = 5.0;
  /// LL128 plans: the latency of a hop scales by this (no post fence: the receiver polls
  /// each 128-byte line's flag as it lands; 0.5 us).
  double ll128_latency_scale = 0.25;
  /// LL128 plans: a block's rate, sending and polling what it receives, is this x
  /// tb_copy_GBps; lines carry 120 data bytes in 128.
  double ll128_rate_scale = 0.45;
  /// Every protocol: the contention penalty of NVLink pairs and ports, in place of the
  /// topology's contention_gamma (paper 001's, measured on NICs): a GPU's NVSwitch port
  /// asked for more than it carries still delivers it (SimOptions::nvlink_gamma). The fit's
  /// grid was 0 to 0.15.
  double nvlink_gamma = 0;
};

inline constexpr CallCosts kCallCosts{};

/// The figures the simulator's runtime model uses in this process: kCallCosts unless
/// set_call_costs() replaced them (`weft tune --call-cost`, the calibration's fit).
const CallCosts& call_costs();
void set_call_costs(const CallCosts& k);

/// `base` with the named figures replaced (name=value, the field names above). An unknown name
/// or a value outside its bounds (times 0 to 1e6 us, rates 0.001 to 1e6 GB/s, scales 0.001
/// to 1000) is InvalidArgument naming it.
CallCosts with_call_cost_overrides(CallCosts base, const std::map<std::string, std::string>& overrides);

/// Sets `o` to run a plan as the runtime's protocol does (docs/cost-model.md, "Small
/// messages"): Simple's whole messages, extra alpha and block rate; LL's and LL128's
/// scaled hops and block rates, their receivers polling the data as it lands.
void set_runtime_protocol(SimOptions& o, algo::Protocol p, const CallCosts& k = call_costs());

/// The runtime's staging bytes per block and message for `p`: half of an LL slot
/// (`ll_slot_bytes`) is flags, an LL128 line of the Simple slot carries 120 bytes in 128.
uint64_t runtime_slot_data_bytes(algo::Protocol p, uint64_t slot_bytes, uint64_t ll_slot_bytes);

/// The launch a call pays on top of its kernel's time.
double call_overhead_us(bool graph, const CallCosts& k = call_costs());

/// Calls `weft bench` and `weft tune` time back to back on every rank's stream (after a
/// warm-up and a synchronize), and take rank 0's mean: the simulator runs as many
/// (SimOptions::calls), so that ranks that do not wait for the whole call (a Broadcast's root,
/// the ranks feeding a Reduce's root) overlap consecutive calls as they do on the GPUs.
inline constexpr int32_t kTimedCalls = 20;

/// Sets `o` to run kTimedCalls back-to-back calls, a launch (call_overhead_us) apart.
void set_back_to_back(SimOptions& o, bool graph, const CallCosts& k = call_costs());

/// Rank 0's mean time per call of a run `o` set up by set_back_to_back (or of one call):
/// (its end of the last call + one launch) / calls.
double per_call_us(const SimReport& r, const SimOptions& o, bool graph, const CallCosts& k = call_costs());

/// Whether the runtime's one-shot kernel can carry this call on one node: the algorithm
/// registry's oneshot answers (plan/algorithms.hpp; AllReduce, AllGather or ReduceScatter,
/// 2 to 8 ranks, at most 512 KiB per rank and peer), the object decide() asks too.
/// `bytes`: nccl-tests' size.
bool oneshot_carries(Collective c, uint64_t bytes, int32_t ranks);

/// The one-shot kernel's time per call, launch included, for `bytes` (nccl-tests' size):
/// launch + exchange + 2 x (ranks - 1) x bytes per peer / oneshot_GBps.
double oneshot_time_us(Collective c, uint64_t bytes, int32_t ranks, bool graph, const CallCosts& k = call_costs());

}  // namespace weft::sim
