// The plan-structure core: what every engine that reads a Plan shares (docs/design.md,
// "The plan-structure core"). The deadlock check and replay (compile/), the runtime's
// lowering and CPU emulator (runtime/) and the simulator's program (sim/) each answer their
// own question, but they number slots, pair sends with receives, validate, and say
// "deadlock" only through this file (and the primitive table, primitive_info in plan.hpp).
//
// * PlanIndex: global slot ids, thread blocks laid out one after another, so program order
//   is id -> id + 1.
// * pair_connections: a connection is (src rank, dst rank, channel); it has one thread block
//   at each end, and its i-th send meets its i-th receive, which must move the same chunk
//   count as the same instance of the same number of instances.
// * validate_plan: the one set of structural rules (listed below).
// * DeadlockVerdict: a deadlock as a value; DeadlockError carries one when an engine throws.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/plan.hpp"
#include "ir/topology.hpp"
#include "util/error.hpp"

namespace weft {

/// Global slot numbering of a plan.
class PlanIndex {
 public:
  explicit PlanIndex(const Plan& p);
  int32_t id(int32_t rank, int32_t tb, int32_t slot) const {
    return static_cast<int32_t>(tb_base[static_cast<size_t>(rank_tb[static_cast<size_t>(rank)] + tb)] + slot);
  }
  int32_t size() const { return static_cast<int32_t>(tb_base.back()); }
  int32_t num_tbs() const { return static_cast<int32_t>(tb_rank.size()); }
  int32_t rank(int32_t id) const { return tb_rank[static_cast<size_t>(tb_of[static_cast<size_t>(id)])]; }
  int32_t local_tb(int32_t id) const { return tb_of[static_cast<size_t>(id)] - rank_tb[static_cast<size_t>(rank(id))]; }
  int32_t index(int32_t id) const { return static_cast<int32_t>(id - tb_base[static_cast<size_t>(tb_of[static_cast<size_t>(id)])]); }
  bool first_in_tb(int32_t id) const { return id == tb_base[static_cast<size_t>(tb_of[static_cast<size_t>(id)])]; }
  bool last_in_tb(int32_t id) const { return id + 1 == tb_base[static_cast<size_t>(tb_of[static_cast<size_t>(id)]) + 1]; }
  const Slot& slot(int32_t id) const { return plan_->ranks[static_cast<size_t>(rank(id))].tbs[static_cast<size_t>(local_tb(id))].slots[static_cast<size_t>(index(id))]; }
  /// Global id of the slot `d` names, for slot `id` of the same rank.
  int32_t dep(int32_t id, const SlotDep& d) const { return this->id(rank(id), d.tb, d.slot); }

  std::vector<int64_t> tb_base;  ///< first slot id of each global thread block; size tbs + 1
  std::vector<int32_t> rank_tb;  ///< first global thread block of each rank; size ranks + 1
  std::vector<int32_t> tb_rank;  ///< rank of each global thread block
  std::vector<int32_t> tb_of;    ///< global thread block of each slot

 private:
  const Plan* plan_;
};

/// One connection (src, dst, channel) and its slots at each end, in program order.
struct PlanConnection {
  int32_t src = 0, dst = 0, channel = 0;
  int32_t send_tb = -1, recv_tb = -1;  ///< local thread block at each end
  std::vector<int32_t> sends, recvs;   ///< slot ids; sends[i] meets recvs[i]
};

struct PlanPairing {
  std::string fault;                 ///< "" when the connections pair up, else one sentence
  std::vector<PlanConnection> conns;     ///< in order of first use
  std::vector<int32_t> send_of;      ///< per slot: the send it receives from, or -1
};

/// Pairs every connection's ends (see above). A plan validate_plan accepts may still fail
/// here: sends and receives in different numbers, one end driven by two thread blocks, or a
/// message whose ends differ in count or instance; `fault` then says which.
PlanPairing pair_connections(const Plan& plan, const PlanIndex& ix);
/// pair_connections, throwing Verify with "plan: " + the fault.
PlanPairing pair_connections_or_throw(const Plan& plan, const PlanIndex& ix);

/// The one structural validator every consumer of a plan relies on: counts and ranks in
/// range, one entry per rank in order, a known primitive, peers in range and distinct from
/// the rank for primitives that send or receive (and -1 otherwise), channel >= 0,
/// 0 <= instance < instances, chunk ranges inside the plan's buffers, dependencies naming an
/// existing slot of the same rank: of another thread block, or an earlier slot of its own
/// (implied by program order, as MSCCL allows; itself or a later slot of its own block is an
/// error). Throws Verify naming the rank, thread block and slot at fault.
/// With `links` recorded, also: one entry per ordered pair of ranks that some slot sends over
/// and no other, sorted by (src, dst), each a known channel kind.
void validate_plan(const Plan& plan);

/// The ordered pairs of ranks some slot of `plan` sends over, sorted by (src, dst).
std::vector<std::pair<int32_t, int32_t>> sending_pairs(const Plan& plan);

/// The channel per ordered pair of ranks the plan sends over, from the topology's link class:
/// GPUs of one node on NVLink, a memory channel; on PCIe (intra_node_link "pcie"), a port
/// channel by copy engine; GPUs of different nodes, a port channel over the network.
std::vector<PlanLink> choose_links(const Plan& plan, const Topology& topo);

/// One slot named in a verdict.
struct PlanSlotRef {
  int32_t rank = 0, tb = 0, slot = 0;
  Primitive primitive = Primitive::Nop;
  int32_t peer = -1;  ///< the slot's send peer, else its receive peer, else -1
};
PlanSlotRef slot_ref(const PlanIndex& ix, int32_t id);
/// "rank 0 tb 1 slot 2 (send to 1)".
std::string describe(const PlanSlotRef& s);

/// Whether a plan (at a FIFO depth, a micro-batch count) deadlocks, as a value: the check
/// returns one, the emulator reports one, the simulator throws one inside DeadlockError.
struct DeadlockVerdict {
  bool ok = true;               ///< false: it can deadlock, or (unpaired) its connections do not pair
  bool unpaired = false;        ///< the check only: !ok because of a connection fault, not a cycle
  std::string message;          ///< one sentence: the cycle, the stuck thread blocks, or the fault
  std::vector<PlanSlotRef> cycle;   ///< the check: the slots on a cycle, in order; engines: stuck slots
};

/// An engine's deadlock, thrown (code Verify) with its verdict.
class DeadlockError : public Error {
 public:
  explicit DeadlockError(DeadlockVerdict v) : Error(ErrorCode::Verify, v.message), verdict(std::move(v)) {}
  DeadlockVerdict verdict;
};

}  // namespace weft
