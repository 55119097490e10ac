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
/// 120 x floor(cap_bytes / count / 128) bytes. `min_nmb` > 1 cuts micro-batches further, so
/// that a chunk slot has at least that many where it holds that many 16-byte units and the
/// pieces of the plan's most instances stay at least `min_cut_piece_bytes`.
exec::Geometry make_geometry(const LoweredPlan& lp, uint64_t n, uint32_t elem_size, uint64_t cap_bytes,
                             uint64_t target_mb_bytes = 0, exec::Protocol protocol = exec::kSimple,
                             uint32_t min_nmb = 1, uint64_t min_cut_piece_bytes = 0);

/// The executor's code for a protocol name: "Simple", "LL" or "LL128"; InvalidArgument otherwise.
exec::Protocol protocol_code(const std::string& name);

/// Several plan thread blocks per CUDA block ("roles"; docs/runtime.md, "Roles per block").
/// A rank whose plan has more than `target_blocks` thread blocks runs `roles` of them in each
/// CUDA block, roles = min(max_roles, ceil(tbs / target_blocks)): role r of a block is its
/// warps [r * w, (r + 1) * w) (w = the block's threads / roles, a multiple of 32), walks its
/// own thread block's slots with its own shared state and synchronises with its own named
/// barrier (bar.sync r + 1, w), never with the block's other roles.
///
/// The rule for which thread blocks share a CUDA block. Correctness needs none: the roles of
/// a CUDA block run concurrently as whole warps that never wait for each other (no block-wide
/// barrier once they split), and every CUDA block is resident at once (as every plan thread
/// block was), so every wait of one role is met by the same slots as when each thread block
/// had a CUDA block of its own; the plan, its connections and the wire protocol are the same.
/// As a margin against a block-wide barrier being added to the kernel later, and because two
/// roles that wait on each other's counters would only take turns, thread blocks that depend
/// on each other (a slot of one waits on a slot of the other, either way) never share a CUDA
/// block. For speed, senders and receivers of the same connection group go together: thread
/// blocks are ordered by their first connection (peer, pool index), then sending before
/// receiving, and each CUDA block takes the next ones in that order that do not depend on
/// its members. Every thread block is in exactly one CUDA block.
struct RoleGroups {
  int32_t roles = 1;            ///< roles per CUDA block; 1: one thread block per CUDA block
  int32_t blocks = 0;           ///< CUDA blocks
  std::vector<int16_t> tb_of;   ///< roles > 1: tb_of[block * roles + role], -1 for an idle role
};
constexpr int32_t kRoleTargetBlocks = 24;
RoleGroups group_thread_blocks(const LoweredRank& lr, int32_t max_roles, int32_t target_blocks = kRoleTargetBlocks);

/// Threads per CUDA block of the interpreter for a call of geometry `g` whose plan runs
/// `roles` plan thread blocks per CUDA block (1: one): exec::kExecBlockThreads, split evenly
/// into whole warps per role; for LL, only as many warps per role as a micro-batch's packets
/// need at four packets per thread (move_ll polls four at once), at least one, so that a
/// small call's block is one or a few warps (its barriers, its start and the index
/// arithmetic every thread repeats per invocation cost less) while a piece still takes one
/// pass of the mover. The plan and the wire protocol do not depend on it.
int exec_threads(const exec::Geometry& g, exec::Protocol protocol, int roles);

/// Bytes of scratch a call with this geometry needs.
uint64_t scratch_bytes(const LoweredPlan& lp, const exec::Geometry& g);

}  // namespace weft
