// Lowering a Plan to the executor's flat per-rank arrays (exec/exec_plan.hpp), with the
// checks that keep a bad plan from reaching a GPU: the plan-structure core's (validate_plan,
// pair_connections in ir/plan_core.hpp) and the executor's own limits.
//
// Connections. A slot that sends to rank p on (channel, instance) and the slot of p that
// receives from this rank on the same (channel, instance) form one connection end each.
// For every ordered pair of ranks the distinct (channel, instance) keys are sorted and
// numbered 0, 1, ...: that number is the connection's index in the communicator's pool of
// per-pair FIFOs, the same on both ends because both compute it from the whole plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/exec_plan.hpp"
#include "ir/plan.hpp"

namespace weft {

/// One connection end of a rank, before pointers are known.
struct ConnRef {
  int32_t peer = 0;
  bool send = false;     ///< this rank sends on it
  int32_t pool_index = 0;
};

struct LoweredRank {
  std::vector<exec::DevTB> tbs;
  std::vector<exec::DevSlot> slots;
  std::vector<int32_t> deps;     ///< counter index (slot number on this rank)
  std::vector<int32_t> dep_tbs;  ///< the thread block of each dep, for error messages
  std::vector<ConnRef> conns;
};

struct LoweredPlan {
  Plan plan;
  std::vector<LoweredRank> ranks;
  int32_t groups[3] = {1, 1, 1};  ///< groups per buffer (see exec_plan.hpp)
  int32_t k[3] = {1, 1, 1};       ///< chunk slots per group
  int32_t chunks[3] = {0, 0, 0};  ///< chunk slots per buffer
  int32_t pool_needed = 0;        ///< connection pool entries per ordered pair this plan uses
  /// For micro-batch sizing: (count, instances) of every slot that sends or receives.
  std::vector<std::pair<int32_t, int32_t>> comm_shapes;
  bool has_reduction = false;
};

/// Lowers and checks `plan` for `nranks` ranks with at most `max_pool` connections per
/// ordered pair of ranks. Throws weft::Error(Verify) naming the rank, thread block and
/// slot of the first problem.
LoweredPlan lower_plan(const Plan& plan, int32_t nranks, int32_t max_pool);

/// The geometry of one call: `n` elements per group of `elem_size` bytes. Micro-batches
/// are as large as `cap_bytes` (the data a staging slot holds) allows for the largest
/// message of the plan, and at most `target_mb_bytes` per chunk slot when that is > 0.
/// For LL128 `cap_bytes` is the slot's size on the wire: each of a message's pieces takes
/// whole 128-byte lines of 120 data bytes (weft/device/packet.hpp), so a piece holds at most
/// 120 x floor(cap_bytes / count / 128) bytes.
exec::Geometry make_geometry(const LoweredPlan& lp, uint64_t n, uint32_t elem_size, uint64_t cap_bytes,
                             uint64_t target_mb_bytes = 0, exec::Protocol protocol = exec::kSimple);

/// The executor's code for a protocol name: "Simple", "LL" or "LL128"; InvalidArgument otherwise.
exec::Protocol protocol_code(const std::string& name);

/// Bytes of scratch a call with this geometry needs.
uint64_t scratch_bytes(const LoweredPlan& lp, const exec::Geometry& g);

}  // namespace weft
