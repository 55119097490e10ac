// SimReport: what one simulated collective call measured, and how it is printed.
//
// Conventions are nccl-tests': `bytes` is the size nccl-tests reports for the collective
// (the whole output buffer for AllGather, the whole input for ReduceScatter, the buffer
// for AllReduce); algbw = bytes / time; busbw = algbw x the collective's bus factor
// (bus_factor()). Link utilization follows paper 001 Table 1 (the fraction of the run during
// which a link carries data, averaged over the links the plan uses); thread-block idle
// follows Table 3 (the fraction of its lifetime a thread block holds its SM while waiting
// on a dependency, a peer's data or a peer's free staging slot).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"

namespace weft::sim {

/// nccl-tests' bus-bandwidth factor: AllReduce 2(n-1)/n; AllGather, ReduceScatter and
/// AllToAll (n-1)/n; Broadcast, Reduce and Custom 1. n < 1 is treated as 1.
double bus_factor(Collective c, int32_t ranks);

struct LinkStat {
  std::string name;         ///< Topology::resource_name
  ResourceId id{ResourceKind::NvlinkPair, 0};
  bool is_link = false;     ///< a link in paper 001's sense (not an NVLink port)
  double capacity_GBps = 0;
  double bytes = 0;         ///< payload bytes that crossed it
  double busy_us = 0;       ///< time with at least one flow on it
  double max_load = 0;      ///< highest (sum of flow rates) / capacity seen (check mode only)
};

struct TbStat {
  int32_t rank = 0;
  int32_t tb = 0;
  int32_t weight = 1;       ///< plan thread blocks with these figures (merged instance siblings)
  double busy_us = 0;       ///< moving, copying or reducing data, or paying alpha
  /// Inside a primitive: from each invocation's dependencies met to its end, so waiting
  /// there for the peer's data or a free staging slot counts, waiting for a dependency does not.
  double in_primitive_us = 0;
  double lifetime_us = 0;   ///< from the launch to its last invocation's end (its last byte)
  double first_busy_us = 0; ///< when it first began to work (its first invocation's busy period)
  int64_t invocations = 0;
  double idle() const { return lifetime_us > 0 ? 1.0 - busy_us / lifetime_us : 0.0; }
  /// Idle as synchronization only: the fraction of the lifetime outside primitives.
  double sync_idle() const { return lifetime_us > 0 ? 1.0 - in_primitive_us / lifetime_us : 0.0; }
};

/// One span of the Chrome trace: a thread block busy with, or waiting for, an invocation.
struct TraceSpan {
  int32_t slot = 0;         ///< global slot id (Program numbering)
  int32_t microbatch = 0;
  double start_us = 0;
  double end_us = 0;
  bool wait = false;        ///< waiting (idle) rather than busy
};

struct SimReport {
  // What was simulated.
  std::string algorithm, scheduler, allocator, topology, execution;
  /// When the plan was tuned for this size (sim/autotune.hpp): the variant taken and why.
  std::string variant, variant_reason;
  Collective collective = Collective::Custom;
  int32_t ranks = 0;
  uint64_t bytes = 0;             ///< nccl-tests size of the call
  uint64_t chunk_bytes = 0;       ///< bytes of one chunk slot
  uint64_t microbatch_bytes = 0;  ///< micro-batch size c (per chunk slot)
  int32_t microbatches = 0;       ///< micro-batches per slot (the last may be short)
  int32_t fifo_depth = 0;

  // Results.
  double time_us = 0;
  /// Per rank: when its last thread block ended its last call (SimOptions::calls), from the
  /// first call's launch at 0.
  std::vector<double> rank_end_us;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double link_utilization = 0;            ///< mean busy fraction of the links used (Table 1)
  double link_bandwidth_utilization = 0;  ///< mean bytes / (capacity x time) of the links used
  int32_t links_used = 0;
  double max_link_load = 0;               ///< check mode: highest load / capacity of any resource
  double tb_busy_mean = 0;
  double tb_idle_mean = 0;                ///< Table 3 "Avg Idle"
  double tb_idle_max = 0;                 ///< Table 3 "Max Idle"
  /// The same over the same lifetime with only dependency waits idle (TbStat::sync_idle):
  /// a block waiting inside a primitive for its peer counts as communicating.
  double tb_sync_idle_mean = 0;
  double tb_sync_idle_max = 0;
  int32_t tbs_per_rank_max = 0;
  double tbs_per_rank_mean = 0;
  int64_t tbs_total = 0;
  int64_t invocations = 0;                ///< invocations of the plan's slots (all instances)
  int64_t simulated_invocations = 0;      ///< invocations the engine stepped (merged instances count once)
  int64_t events = 0;
  double wall_seconds = 0;                ///< how long the simulation itself took

  std::vector<LinkStat> links;            ///< every resource used
  std::vector<TbStat> tbs;                ///< every simulated thread block with at least one slot (see TbStat::weight)
  std::vector<TraceSpan> trace;           ///< filled when tracing was asked for
  std::vector<int32_t> trace_tb;          ///< global thread block of each trace span
  bool trace_truncated = false;
  // With SimOptions::slot_times, per slot of the simulated program (Simulator::program()):
  // when its first invocation began to work and its last one ended, and how long its
  // invocations were busy (TbStat::busy_us, per slot).
  std::vector<double> slot_first_us, slot_last_us, slot_busy_us;

  // Check mode only (SimOptions::check): per invocation (slot * microbatches + k).
  std::vector<uint32_t> inv_count;        ///< times each invocation ran (must be 1)
  std::vector<double> inv_ready_us;       ///< when its dependencies were all met
  std::vector<double> inv_start_us;       ///< when it began to work (after waiting for data or a staging slot)
  std::vector<double> inv_end_us;         ///< when it finished
};

/// Fills the thread-block means and maxima (tb_busy_mean, tb_idle_mean/max,
/// tb_sync_idle_mean/max, tbs_total) from `r.tbs`, each block counting `weight` times.
void summarize_tbs(SimReport& r);

/// One JSON object (a single line) with the keys `weft simulate --json` documents.
std::string report_to_json(const SimReport& r);

/// nccl-tests style table row values: size, time (us), algbw, busbw, link util, idle mean/max, TBs.
std::vector<std::string> report_table_header();
std::vector<std::string> report_table_row(const SimReport& r);

}  // namespace weft::sim
