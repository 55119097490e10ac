#include "plan/hand_built.hpp"

#include <algorithm>
#include <optional>

#include "util/error.hpp"

namespace weft {

namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

BufferRange in(int i) { return {Buffer::Input, i}; }
BufferRange out(int i) { return {Buffer::Output, i}; }
BufferRange scratch(int i) { return {Buffer::Scratch, i}; }

/// Builds thread blocks of one rank, one instance at a time.
class Builder {
 public:
  Builder(int rank, int instance, int instances) : rank_(rank), inst_(instance), insts_(instances) {}

  /// Starts a new thread block; returns its index within this instance's blocks.
  int tb() {
    tbs_.emplace_back();
    return static_cast<int>(tbs_.size()) - 1;
  }
  /// Adds a slot to the current thread block.
  Slot& add(Primitive p, int send_peer, int recv_peer, BufferRange src, BufferRange dst) {
    Slot s;
    s.primitive = p;
    s.send_peer = send_peer;
    s.recv_peer = recv_peer;
    s.channel = inst_;
    s.src = src;
    s.dst = dst;
    s.count = 1;
    s.instance = inst_;
    s.instances = insts_;
    tbs_.back().slots.push_back(s);
    return tbs_.back().slots.back();
  }
  Slot& send(int peer, BufferRange src) { return add(Primitive::Send, peer, -1, src, {}); }
  Slot& recv(int peer, BufferRange dst) { return add(Primitive::Recv, -1, peer, {}, dst); }
  Slot& copy(BufferRange src, BufferRange dst) { return add(Primitive::Copy, -1, -1, src, dst); }
  std::vector<ThreadBlock>& tbs() { return tbs_; }
  int rank() const { return rank_; }
  /// Set by builders whose shape needs the micro-batch loop outside the slot loop.
  std::optional<ExecutionModel> model;

 private:
  int rank_, inst_, insts_;
  std::vector<ThreadBlock> tbs_;
};

using RankBuilder = void (*)(Builder& b, int R, const HandBuiltSpec& spec);

// --- AllReduce ---------------------------------------------------------------------------

/// Ring: reduce-scatter then all-gather around r -> r+1, fused (rrs, rrcs, rcs), one
/// thread block per instance, micro-batch loop outside (what NCCL's ring does).
void allreduce_ring(Builder& b, int R, const HandBuiltSpec&) {
  const int r = b.rank(), next = mod(r + 1, R), prev = mod(r - 1, R);
  b.tb();
  b.send(next, in(mod(r - 1, R)));
  for (int s = 0; s + 3 <= R; ++s) b.add(Primitive::RecvReduceSend, next, prev, in(mod(r - s - 2, R)), {});
  b.add(Primitive::RecvReduceCopySend, next, prev, in(r), out(r));
  for (int t = 1; t <= R - 2; ++t) b.add(Primitive::RecvCopySend, next, prev, {}, out(mod(r - t, R)));
  b.recv(prev, out(mod(r + 1, R)));
}

/// All-pairs, one shot: every rank sends its whole buffer to every peer and reduces what
/// arrives into its output. Out of place: one sender and one receiver thread block per
/// instance, pipelined over micro-batches. In place the output overwrites the input that
/// the sends read, so one thread block per instance sends each micro-batch to every peer
/// before reducing into it.
void allreduce_allpairs(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank();
  b.tb();
  for (int j = 1; j < R; ++j) b.send(mod(r + j, R), in(0));
  if (spec.in_place) b.model = ExecutionModel::Algorithm;
  else b.tb();
  for (int j = 1; j < R; ++j) b.add(Primitive::RecvReduceCopy, -1, mod(r - j, R), j == 1 ? in(0) : out(0), out(0));
}

// --- AllGather ---------------------------------------------------------------------------

void allgather_ring(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank(), next = mod(r + 1, R), prev = mod(r - 1, R);
  b.tb();
  b.send(next, in(0));
  for (int t = 1; t <= R - 2; ++t) b.add(Primitive::RecvCopySend, next, prev, {}, out(mod(r - t, R)));
  b.recv(prev, out(mod(r + 1, R)));
  if (!spec.in_place) {
    b.tb();
    b.copy(in(0), out(r));
  }
}

void allgather_allpairs(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank();
  b.tb();
  for (int j = 1; j < R; ++j) b.send(mod(r + j, R), in(0));
  b.tb();
  for (int j = 1; j < R; ++j) b.recv(mod(r - j, R), out(mod(r - j, R)));
  if (!spec.in_place) {
    b.tb();
    b.copy(in(0), out(r));
  }
}

// --- ReduceScatter -----------------------------------------------------------------------

void reducescatter_ring(Builder& b, int R, const HandBuiltSpec&) {
  const int r = b.rank(), next = mod(r + 1, R), prev = mod(r - 1, R);
  b.tb();
  b.send(next, in(mod(r - 1, R)));
  for (int s = 0; s + 3 <= R; ++s) b.add(Primitive::RecvReduceSend, next, prev, in(mod(r - s - 2, R)), {});
  b.add(Primitive::RecvReduceCopy, -1, prev, in(r), out(0));
}

void reducescatter_allpairs(Builder& b, int R, const HandBuiltSpec&) {
  const int r = b.rank();
  b.tb();
  for (int j = 1; j < R; ++j) b.send(mod(r + j, R), in(mod(r + j, R)));
  b.tb();
  for (int j = 1; j < R; ++j) b.add(Primitive::RecvReduceCopy, -1, mod(r - j, R), j == 1 ? in(r) : out(0), out(0));
}

// --- AllToAll ----------------------------------------------------------------------------

void alltoall_allpairs(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank();
  if (!spec.in_place) {
    b.tb();
    for (int j = 1; j < R; ++j) b.send(mod(r + j, R), in(mod(r + j, R)));
    b.tb();
    for (int j = 1; j < R; ++j) b.recv(mod(r - j, R), out(mod(r - j, R)));
    b.tb();
    b.copy(in(r), out(r));
    return;
  }
  // In place: per micro-batch, send every block, receive into scratch, then copy into
  // place (the blocks received overwrite blocks that had to be sent first).
  b.model = ExecutionModel::Algorithm;
  b.tb();
  for (int j = 1; j < R; ++j) b.send(mod(r + j, R), in(mod(r + j, R)));
  for (int j = 1; j < R; ++j) b.recv(mod(r - j, R), scratch(j - 1));
  for (int j = 1; j < R; ++j) b.copy(scratch(j - 1), out(mod(r - j, R)));
}

// --- Broadcast and Reduce ----------------------------------------------------------------

void broadcast_allpairs(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank(), root = spec.root;
  if (r == root) {
    b.tb();
    for (int j = 1; j < R; ++j) b.send(mod(root + j, R), in(0));
    if (!spec.in_place) {
      b.tb();
      b.copy(in(0), out(0));
    }
  } else {
    b.tb();
    b.recv(root, out(0));
  }
}

void broadcast_chain(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank(), root = spec.root, pos = mod(r - root, R);
  const int next = mod(r + 1, R), prev = mod(r - 1, R);
  b.tb();
  if (pos == 0) {
    b.send(next, in(0));
    if (!spec.in_place) {
      b.tb();
      b.copy(in(0), out(0));
    }
  } else if (pos == R - 1) {
    b.recv(prev, out(0));
  } else {
    b.add(Primitive::RecvCopySend, next, prev, {}, out(0));
  }
}

void reduce_allpairs(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank(), root = spec.root;
  b.tb();
  if (r != root) {
    b.send(root, in(0));
    return;
  }
  for (int j = 1; j < R; ++j) b.add(Primitive::RecvReduceCopy, -1, mod(root - j, R), j == 1 ? in(0) : out(0), out(0));
}

/// Chain towards the root: root+R-1 -> ... -> root+1 -> root, each hop reducing.
void reduce_chain(Builder& b, int R, const HandBuiltSpec& spec) {
  const int r = b.rank(), root = spec.root, pos = mod(r - root, R);
  const int toward = mod(r - 1, R), from = mod(r + 1, R);
  b.tb();
  if (pos == R - 1) b.send(toward, in(0));
  else if (pos == 0) b.add(Primitive::RecvReduceCopy, -1, from, in(0), out(0));
  else b.add(Primitive::RecvReduceSend, toward, from, in(0), {});
}

// --- one rank: a local copy --------------------------------------------------------------

void local_copy(Builder& b, int, const HandBuiltSpec& spec) {
  if (spec.in_place) return;
  b.tb();
  b.copy(in(0), out(0));
}

struct Entry {
  Collective collective;
  const char* algorithm;
  RankBuilder build;
  ExecutionModel model;
};

const Entry kEntries[] = {
    {Collective::AllReduce, "ring", allreduce_ring, ExecutionModel::Algorithm},
    {Collective::AllReduce, "allpairs", allreduce_allpairs, ExecutionModel::Task},
    {Collective::AllGather, "ring", allgather_ring, ExecutionModel::Algorithm},
    {Collective::AllGather, "allpairs", allgather_allpairs, ExecutionModel::Task},
    {Collective::ReduceScatter, "ring", reducescatter_ring, ExecutionModel::Algorithm},
    {Collective::ReduceScatter, "allpairs", reducescatter_allpairs, ExecutionModel::Task},
    {Collective::AllToAll, "allpairs", alltoall_allpairs, ExecutionModel::Task},
    {Collective::Broadcast, "allpairs", broadcast_allpairs, ExecutionModel::Task},
    {Collective::Broadcast, "chain", broadcast_chain, ExecutionModel::Task},
    {Collective::Reduce, "allpairs", reduce_allpairs, ExecutionModel::Task},
    {Collective::Reduce, "chain", reduce_chain, ExecutionModel::Task},
};

}  // namespace

std::vector<std::string> hand_built_algorithms(Collective c) {
  std::vector<std::string> names;
  for (const Entry& e : kEntries)
    if (e.collective == c) names.emplace_back(e.algorithm);
  return names;
}

Plan hand_built_plan(Collective c, int nranks, const HandBuiltSpec& spec) {
  if (nranks < 1) fail(ErrorCode::InvalidArgument, "hand-built plan: rank count " + std::to_string(nranks) + " is not positive");
  if (spec.instances < 1 || spec.instances > 64)
    fail(ErrorCode::InvalidArgument, "hand-built plan: " + std::to_string(spec.instances) + " instances (allowed 1..64)");
  if ((c == Collective::Broadcast || c == Collective::Reduce) && (spec.root < 0 || spec.root >= nranks))
    fail(ErrorCode::InvalidArgument, "hand-built plan: root " + std::to_string(spec.root) + " is outside 0.." +
                                         std::to_string(nranks - 1));
  const Entry* entry = nullptr;
  for (const Entry& e : kEntries)
    if (e.collective == c && spec.algorithm == e.algorithm) entry = &e;
  if (entry == nullptr && c != Collective::Custom && nranks > 1)
    fail(ErrorCode::InvalidArgument, "hand-built plan: " + std::string(to_string(c)) + " has no built-in algorithm '" +
                                         spec.algorithm + "'");
  if (entry == nullptr && nranks > 1) fail(ErrorCode::InvalidArgument, "hand-built plan: no algorithm for Custom");

  Plan p;
  p.algorithm = "builtin:" + std::string(nranks == 1 ? "local" : entry->algorithm);
  p.collective = c;
  p.num_ranks = nranks;
  p.in_place = spec.in_place;
  p.root = spec.root;
  p.protocol = spec.protocol;
  p.execution = nranks == 1 ? ExecutionModel::Task : entry->model;
  p.scheduler = "builtin";
  p.allocator = "builtin";
  p.num_subpipelines = 1;
  const int R = nranks;
  switch (c) {
    case Collective::AllGather: p.input_chunks = 1; p.output_chunks = R; break;
    case Collective::ReduceScatter: p.input_chunks = R; p.output_chunks = 1; break;
    case Collective::AllToAll: p.input_chunks = R; p.output_chunks = R; break;
    case Collective::AllReduce: p.input_chunks = p.output_chunks = (spec.algorithm == "ring" ? R : 1); break;
    default: p.input_chunks = p.output_chunks = 1; break;
  }
  if (c == Collective::AllToAll && spec.in_place && R > 1) p.scratch_chunks = R - 1;
  RankBuilder build = nranks == 1 ? local_copy : entry->build;
  for (int r = 0; r < R; ++r) {
    RankPlan rp;
    rp.rank = r;
    for (int i = 0; i < spec.instances; ++i) {
      Builder b(r, i, spec.instances);
      build(b, R, spec);
      if (b.model) p.execution = *b.model;
      // Dependencies name thread blocks within this instance: shift them to global numbers.
      const int base = static_cast<int>(rp.tbs.size());
      for (ThreadBlock& tb : b.tbs()) {
        for (Slot& s : tb.slots)
          for (SlotDep& d : s.deps) d.tb += base;
        rp.tbs.push_back(std::move(tb));
      }
    }
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

}  // namespace weft
