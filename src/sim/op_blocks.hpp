// Ops on fewer blocks (docs/compile.md, "Ops on fewer blocks"): where each connection's ops
// run among its m thread blocks, chosen from a simulated run of the plan in which every op
// takes all m (CompileOptions::op_blocks).
//
// A connection's ops split over all its blocks run one after the other, each on every block;
// an op whose data come at another link's pace (a NIC's) then holds all m blocks waiting, and
// a connection that needs 1.6 blocks of work over the call keeps 2 busy 80% of it. Placed
// instead, the ops of one connection run side by side on different blocks, one block each,
// and a block whose ops are done ends early.
#pragma once

#include <memory>
#include <vector>

#include "compile/compiler.hpp"
#include "ir/topology.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {

/// From `reference` (compiled at task level with its graph and pipeline kept, no op_blocks,
/// no pacing) and its run on `sim` (a Simulator of reference.plan built without merging
/// instances, run with SimOptions::slot_times): a placement of its ops on their connections'
/// blocks.
class OpPlacer {
 public:
  OpPlacer(const CompileResult& reference, const Topology& topo, const Simulator& sim, const SimReport& times);
  ~OpPlacer();
  /// CompileOptions::op_blocks for `transfers` transfers. Units (ops fused into one
  /// primitive) in program order: a unit none of whose ops crosses the link class that
  /// bounds the call (compile/lower.hpp, bounding_link) takes one block of its connection,
  /// the lowest on which it starts in time or ends within one micro-batch of the soonest end
  /// it has on any of them (a unit fed at another link's pace ends with its feed). In time:
  /// within one micro-batch of when it began in the run (or of when what it reads is ready,
  /// where that now comes later) or, `by_latest`, by its latest start: the latest at which it
  /// makes each micro-batch before the ops that read it (or reuse its buffers) need it, going
  /// back along the data edges from the ops that keep their blocks, which start as they did
  /// in the run (at the edge's rank) and go at its pace; a unit that nothing such follows
  /// keeps its start in the run (after refine(): ends by that run's end). Any other unit takes
  /// all its connection's blocks. Each unit holds its blocks (at both ends) until it ends: its
  /// work (its busy time in the run summed over its blocks, at its busiest end) over its
  /// blocks after it starts, and at least one micro-batch after what it reads has ended, by
  /// the run's figures or by this placement's for units placed before it. Empty when no unit
  /// takes fewer blocks than its connection has, or when the plan is not at task level or
  /// the run has no slot times.
  std::vector<OpBlocks> place(size_t transfers, bool by_latest = true);
  /// Takes when the ops that keep their blocks start (and go), and the call's end, from
  /// `times`, a run (with SimOptions::slot_times) on `sim` of `placed`, the plan compiled
  /// with what place() returned: the latest starts of the next place() go by them instead of
  /// the reference run's, which ran every op on all its blocks and so at other times.
  void refine(const Plan& placed, const Simulator& sim, const SimReport& times);

  /// A placement with reduce chains in another order (docs/compile.md, "Reduce chains in
  /// another order"): what CompileOptions::op_blocks, chain_keys and op_order take.
  struct Chains {
    std::vector<OpBlocks> op_blocks;
    std::vector<double> chain_keys, op_order;
  };
  /// From `placed` (what place() returned for `algo`, the algorithm `reference` was compiled
  /// from): where a connection's blocks start with two ops of different reduce chains
  /// (compile/chain_order.hpp) side by side, one of them alone on its block (that block ends
  /// after it) and the other followed by more, the lone op is taken from the chains that
  /// have the most such ops (the two exchange blocks where that evens the counts), and each
  /// chain runs its lone ops first, so that a block that ends early is reached early in its
  /// chain instead of waiting from the launch; the others keep their order. The program
  /// runs by latest start (each op by the latest start of the chain
  /// position it takes, by the last run given, refine()'s or else the reference's; ops that
  /// keep their blocks by their start in that run), so that a
  /// block that goes on runs the op late in its chain before the ops needed after it. Empty
  /// op_blocks when no chain changes.
  Chains order_chains(const Algorithm& algo, const std::vector<OpBlocks>& placed) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::sim
