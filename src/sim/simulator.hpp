// The simulator's entry point: executes a Plan on a Topology, as the GPU executor will.
//
// Execution (docs/design.md, "The execution model"; src/ir/plan.hpp is the contract):
// every thread block walks its slots in order, each slot over every micro-batch (task
// level) or, under ExecutionModel::Algorithm, every slot per micro-batch. Before
// invocation k a slot waits until every slot in its `deps` has finished invocation k. A
// sender writes message m of a connection into staging slot m mod fifo_depth on the
// receiver, so it may run up to fifo_depth messages ahead; the receiver frees the slot when
// its invocation ends. docs/simulator.md describes the engine, docs/cost-model.md the costs.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/plan.hpp"
#include "ir/topology.hpp"
#include "sim/cost_model.hpp"
#include "sim/report.hpp"

namespace weft::sim {

struct SimOptions {
  uint64_t bytes = 0;                   ///< the call's size, nccl-tests convention (see report.hpp)
  uint64_t microbatch_bytes = 1 << 20;  ///< micro-batch size per chunk slot (the paper's 1 MiB)
  /// Size micro-batches as the GPU runtime does instead (src/exec/plan_lowering.cpp,
  /// make_geometry): each thread block's part of a message fills at most one staging slot of
  /// `staging_slot_bytes`, so a micro-batch is staging_slot_bytes x instances / chunks-per-
  /// message of the plan's most constrained slot, 16-byte aligned. `microbatch_bytes` is then
  /// ignored. This is what to compare with measured runs.
  bool runtime_microbatch = false;
  uint64_t staging_slot_bytes = 512 << 10;  ///< the runtime's default Simple staging slot
  int32_t fifo_depth = 4;               ///< staging slots per connection (the runtime's default)
  /// Every connection latency x this (the runtime's LL and LL128 hops: sim/call_model.hpp,
  /// set_runtime_protocol).
  double latency_scale = 1;
  /// Every alpha (extra_alpha_us included) x this (the runtime's LL and LL128 steps).
  double alpha_scale = 1;
  /// Above 0: a receiving block polls its data as it lands (LL, LL128), so that a receive
  /// (Recv, RecvReduceCopy) also takes its bytes at most at tb_copy_GBps x this, not only at
  /// the block's local (HBM) rate: a block receiving from several peers in turn takes them
  /// one after the other at that rate. 0: local rate only (Simple reads a landed message).
  double polled_receive_scale = 0;
  /// At least 0: the contention penalty of NVLink resources (pairs and ports) instead of the
  /// topology's contention_gamma (the runtime's NVSwitch ports: CallCosts::nvlink_gamma);
  /// below 0: the topology's. NICs and rack links keep the topology's.
  double nvlink_gamma = -1;
  /// Receive as the runtime's Simple protocol does: a message is read (copied, reduced or
  /// forwarded) once its sender has posted all of it, not as its bytes land.
  bool whole_messages = false;
  /// Back-to-back calls of the plan, as `weft tune` and `weft bench` time them (a stream of
  /// calls per rank): a rank's next call starts `call_gap_us` after the last of its thread
  /// blocks ended the call before, while its connections keep their messages and credits,
  /// so a rank that only sends (a Broadcast's root) runs ahead of the ranks it feeds by up to
  /// fifo_depth messages. The report's time_us is then the end of the last call, and
  /// rank_end_us says when each rank ended it. 1 to 1000; not with `check`.
  int32_t calls = 1;
  double call_gap_us = 0;  ///< 0 to 1e6 us
  /// Added to every invocation's alpha (the runtime's Simple invocation: CallCosts::simple_alpha_extra_us).
  double extra_alpha_us = 0;
  /// Thread blocks' per-block rates x this (the runtime's blocks: CallCosts::simple_rate_scale,
  /// ll_rate_scale, ll128_rate_scale).
  double rate_scale = 1;
  /// A block's local work (copying or reducing out of staging, local copies and reductions)
  /// runs at tb_local_GBps x this (the runtime's Simple blocks: CallCosts::simple_local_rate_scale).
  double local_rate_scale = 1;
  bool trace = false;                   ///< record spans for a Chrome trace
  /// Record when each slot first began to work and last finished (SimReport::slot_first_us,
  /// slot_last_us): the timeline the tuner merges thread blocks on (sim/autotune.hpp).
  bool slot_times = false;
  size_t trace_limit = 2'000'000;       ///< spans kept at most; the report says when it cut
  /// Track every resource's load at each change and every invocation's times (tests; slow).
  bool check = false;
};

struct Program;

/// A plan bound to a topology, ready to be run at any size. Building it validates the plan
/// (Error(Verify) naming rank, thread block and slot) and the topology.
class Simulator {
 public:
  /// `merge_instances`: simulate instance siblings as one block (exact, much faster; see
  /// merge_instance_siblings in program.hpp). Tests turn it off to compare.
  /// `max_memory_bytes`: the memory budget (0: default_memory_budget()); a plan whose
  /// program would need more is refused with InvalidArgument naming both figures.
  Simulator(const Plan& plan, const Topology& topo, bool merge_instances = true, uint64_t max_memory_bytes = 0);
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  /// Simulates one call. Throws InvalidArgument when the size gives less than one byte per
  /// chunk slot or options are out of range; Verify when the plan deadlocks (the message
  /// names the stuck thread blocks and what each waits for).
  SimReport run(const SimOptions& options) const;

  const CostModel& cost_model() const { return cost_; }
  const Program& program() const { return *program_; }

  /// The micro-batch the runtime would use with staging slots of `staging_slot_bytes`
  /// (SimOptions::runtime_microbatch), before capping at the chunk slot's bytes.
  uint64_t runtime_microbatch_bytes(uint64_t staging_slot_bytes) const;

 private:
  std::unique_ptr<Program> program_;
  CostModel cost_;
  Topology topo_;
  Plan meta_;  ///< the plan's descriptive fields only (no ranks)
  double min_tb_share_ = 0;  ///< smallest (instances / chunks) over slots that move data
};

/// Convenience: Simulator(plan, topo).run(options).
SimReport simulate(const Plan& plan, const Topology& topo, const SimOptions& options);

}  // namespace weft::sim
