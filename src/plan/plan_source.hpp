// Where the runtime's plans come from, and the check every plan passes before it is
// uploaded.
//
// A plan is built by hand (plan/hand_built.hpp: "ring", "allpairs", "chain"), compiled,
// or read from a plan file, the last two through the plan builder (plan/builder.hpp):
// compiled is an algorithm from algorithms/ (by name, e.g. "ring_allreduce") or a .rccl /
// .xml file, loaded for the communicator's rank count (parameter nRanks, and Root for
// Broadcast and Reduce), verified symbolically, and compiled for a one-node NVLink topology
// of that many GPUs; a plan file (.json, what `weft compile -o` writes) is taken as written
// when its rank count, collective, root and buffers match the call. Either way the lowered plan then runs on the CPU emulator on random data,
// with the communicator's FIFO depth and several micro-batches, and must reproduce the host
// reference exactly and leave every buffer the collective does not own untouched; a plan
// that deadlocks, computes a wrong result or writes where it must not is refused with an
// error naming what went wrong, before it reaches a GPU (exec/plan_check.hpp).
#pragma once

#include <string>
#include <vector>

#include "compile/deadlock.hpp"
#include "ir/plan.hpp"
#include "ir/topology.hpp"

namespace weft {

/// True for the names hand_built_plan understands.
bool is_hand_built_name(const std::string& algorithm);

/// The collective an algorithm name, algorithm file or plan file implements (loaded once for
/// `nranks` ranks and cached). Throws weft::Error naming the file when it cannot be loaded.
Collective algorithm_collective(const std::string& algorithm, int nranks);

/// The machine the runtime compiles for: WEFT_TOPOLOGY (a file, a preset or "detect"), by
/// default the h200-1x8 preset's figures as one node of `nranks` GPUs; split into nodes where
/// WEFT_EMULATE_NODES or the communicator's regular layout (`node_of_rank`) says so.
Topology node_topology(int nranks, const std::vector<int>& node_of_rank = {});

/// Builds (or compiles) the plan of `algorithm` for collective `c` on `nranks` ranks; a
/// compiled plan is scheduled with `scheduler` and `allocator` and checked for deadlock with
/// FIFOs of `fifo_depth` messages (the communicator's WEFT_FIFO_DEPTH). Throws InvalidArgument when the algorithm implements
/// another collective or root, Verify when it fails verification or deadlocks, Parse for a
/// malformed file. `node_of_rank` (the communicator's nodes, plan/placement.hpp; empty:
/// WEFT_EMULATE_NODES alone) shapes the topology compiled for, and a compiled plan records
/// the links the runtime builds for it (port-net between nodes, memory within one).
Plan make_plan(Collective c, int nranks, const std::string& algorithm, const std::string& protocol, int instances,
               bool in_place, int root, int fifo_depth = kDefaultFifoDepth, const std::string& scheduler = "hpds",
               const std::string& allocator = "state", const std::vector<int>& node_of_rank = {});

}  // namespace weft
