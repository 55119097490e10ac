// Partitioned collectives as schedules of steps (paper 002 §IV-B, Algorithms 1 and 2).
//
// Every user partition of a collective runs the same schedule on its own: step after step,
// each step (I, A, op, O, R) first takes the messages of its incoming neighbours I into
// chunk A of the partition (op: copy, or reduce into what is there), then sends chunk R to
// its outgoing neighbours O. A partition of the collective buffer is cut into `chunks`
// chunks (by element: chunk c holds elements [n*c/chunks, n*(c+1)/chunks)).
//
// Each message has a slot: its index among the messages that one sender sends one receiver
// per partition, so both ends agree where it lands (the receiver's scratch and flag for
// (partition, slot)). check_schedules() proves a set of schedules, one per rank, consistent
// and deadlock-free; simulate() runs them on contribution sets (as the plan verifier does),
// so a schedule is checked against its collective's postcondition before it runs.
//
// On the GPU the block that readies a partition runs its whole schedule inside the
// producing kernel (include/weft/part/device.hpp): the reduction is a device loop inside
// the step, with no extra kernel or stream synchronization.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace weft::part {

enum class StepOp : uint8_t { None = 0, Copy = 1, Reduce = 2 };

struct Message {
  int peer = 0;       ///< the other end
  uint32_t slot = 0;  ///< index among the messages of this (sender, receiver) pair, per partition
};

struct Step {
  std::vector<Message> in;   ///< I: messages received in this step
  int recv_chunk = -1;       ///< A: the chunk they land in
  StepOp op = StepOp::None;  ///< what a received message does to chunk A
  std::vector<Message> out;  ///< O: messages sent after the receives
  int send_chunk = -1;       ///< R: the chunk sent
};

struct Schedule {
  int rank = 0, nranks = 0;
  uint32_t chunks = 1;
  std::vector<Step> steps;
  /// Messages per partition this rank receives from `peer` (its scratch slots for it).
  uint32_t slots_from(int peer) const;
  /// Messages per partition this rank sends to `peer`.
  uint32_t slots_to(int peer) const;
  /// The distinct ranks this rank receives from / sends to, ascending.
  std::vector<int> in_peers() const;
  std::vector<int> out_peers() const;
};

/// Ring reduce-scatter then all-gather (paper 002 Algorithm 1): 2P-1 steps, P chunks.
/// Step 0 sends chunk rank; step i (1..2P-2) receives chunk (rank-i) mod P from rank-1,
/// reducing for i <= P-1 and copying after, and sends that chunk on to rank+1 except in the last.
Schedule ring_allreduce(int rank, int nranks);
/// Chain broadcast from `root` along the ring (root, root+1, ...): one chunk per partition;
/// each rank but the root receives it, each but the last forwards it.
Schedule chain_broadcast(int rank, int nranks, int root);

/// Checks one schedule per rank (all[r].rank == r): chunk and peer indices in range, every
/// message sent exactly once and received exactly once with equal chunk indices on both
/// ends, slots numbered 0..n-1 per pair in step order, and no deadlock (each rank runs its
/// steps in order; a step waits for its incoming messages). weft::Error(Verify) otherwise.
void check_schedules(const std::vector<Schedule>& all);

/// Contribution sets: [rank][chunk] = the ranks whose data the chunk holds.
using Contributions = std::vector<std::vector<std::set<int>>>;
/// Runs the schedules (check_schedules first) on `init`; a reduce that would count a
/// contribution twice is an error. Returns the final sets.
Contributions simulate(const std::vector<Schedule>& all, Contributions init);

/// Elements [begin, end) of chunk `c` of a partition of `n` elements cut into `chunks`.
inline uint64_t chunk_begin(uint64_t n, uint32_t chunks, uint32_t c) { return n * c / chunks; }

}  // namespace weft::part
