#include "compile/replay.hpp"

#include <algorithm>
#include <numeric>

#include "compile/union_find.hpp"
#include "ir/plan_core.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

struct Ref {
  int32_t rank, tb, slot, global;
};

/// One lane of a plan replayed as an Algorithm (replay_plan): the lane's slots, the merged
/// nodes of a message's ends, their levels and each slot's position along its forwarding
/// chain.
class LaneReplay {
 public:
  LaneReplay(const Plan& plan, int32_t lane, int32_t lanes) : plan_(plan), ix_(plan), lane_(lane) {
    select(lanes);
  }

  Algorithm replay() {
    levels();
    positions();
    return transfers();
  }

 private:
  const Slot& slot(int32_t id) const { return ix_.slot(refs_[id].global); }

  /// The slots of this lane, in (rank, thread block, slot) order (local_ maps a plan slot
  /// to it), each receive's sender and the merged nodes. Pairing is per message, and both
  /// ends of a message are the same instance of the same count, so the whole plan's pairing
  /// restricted to the lane is the lane's.
  void select(int32_t lanes) {
    const std::vector<int32_t> send_of = pair_connections_or_throw(plan_, ix_).send_of;
    local_.assign(static_cast<size_t>(ix_.size()), -1);
    for (int32_t g = 0; g < ix_.size(); ++g) {
      const Slot& s = ix_.slot(g);
      if (s.instance != static_cast<int32_t>(static_cast<int64_t>(lane_) * s.instances / lanes)) continue;
      local_[static_cast<size_t>(g)] = static_cast<int32_t>(refs_.size());
      refs_.push_back({ix_.rank(g), ix_.local_tb(g), ix_.index(g), g});
    }
    n_ = static_cast<int32_t>(refs_.size());
    sender_.assign(n_, -1);
    UnionFind ends(n_);
    for (int32_t id = 0; id < n_; ++id)
      if (const int32_t from = send_of[static_cast<size_t>(refs_[id].global)]; from >= 0) {
        sender_[id] = local_[static_cast<size_t>(from)];
        WEFT_ASSERT(sender_[id] >= 0, "a message's two ends in different lanes");
        ends.unite(sender_[id], id);
      }
    root_.resize(n_);
    for (int32_t i = 0; i < n_; ++i) root_[i] = ends.find(i);
    members_.assign(n_, {});
    for (int32_t i = 0; i < n_; ++i) members_[root_[i]].push_back(i);
  }

  /// Levels of merged nodes: longest path over program order and dependencies (lane-local).
  void levels() {
    std::vector<std::vector<int32_t>> out(n_);  // per slot: slots that must follow it
    for (int32_t id = 0; id < n_; ++id) {
      if (id + 1 < n_ && refs_[id + 1].rank == refs_[id].rank && refs_[id + 1].tb == refs_[id].tb) out[id].push_back(id + 1);
      for (const SlotDep& d : slot(id).deps) {
        int32_t from = local_[static_cast<size_t>(ix_.dep(refs_[id].global, d))];
        if (from >= 0) out[from].push_back(id);
      }
    }
    std::vector<int32_t> indeg(n_, 0);
    level_.assign(n_, 0);
    for (int32_t i = 0; i < n_; ++i)
      for (int32_t j : out[i]) ++indeg[root_[j]];
    std::vector<int32_t> ready;
    for (int32_t i = 0; i < n_; ++i)
      if (root_[i] == i && indeg[i] == 0) ready.push_back(i);
    int32_t processed = 0, roots = 0;
    for (int32_t i = 0; i < n_; ++i) roots += root_[i] == i;
    while (!ready.empty()) {
      int32_t u = ready.back();
      ready.pop_back();
      ++processed;
      for (int32_t m : members_[u])
        for (int32_t j : out[m]) {
          int32_t v = root_[j];
          if (v == u) fail(ErrorCode::Verify, "plan: a thread block waits on a transfer of its own forwarding chain");
          level_[v] = std::max(level_[v], level_[u] + 1);
          if (--indeg[v] == 0) ready.push_back(v);
        }
    }
    if (processed != roots) fail(ErrorCode::Verify, "plan: its slots form a cycle, so it can deadlock (see check_deadlock)");
  }

  /// Position along the forwarding chain: hops from the node's first sender.
  void positions() {
    pos_.assign(n_, -1);
    max_pos_ = 0;
    for (int32_t i = 0; i < n_; ++i) {
      std::vector<int32_t> path;
      int32_t x = i;
      while (pos_[x] < 0 && sender_[x] >= 0) {
        path.push_back(x);
        x = sender_[x];
        if (path.size() > members_[root_[i]].size())
          fail(ErrorCode::Verify, "plan: a forwarding chain loops back on itself");
      }
      int32_t p = pos_[x] >= 0 ? pos_[x] : 0;
      pos_[x] = p;
      for (auto it = path.rbegin(); it != path.rend(); ++it) pos_[*it] = ++p;
      max_pos_ = std::max(max_pos_, p);
    }
  }

  /// The transfers: every local copy or reduce, and every receive as a transfer from the
  /// value its sender sends, at a step from its node's level and its chain position.
  Algorithm transfers() {
    const int64_t width = 2 * (static_cast<int64_t>(max_pos_) + 1) + 1;
    Algorithm a;
    a.name = plan_.algorithm + " (replay of lane " + std::to_string(lane_) + ")";
    a.collective = plan_.collective;
    a.ranks = plan_.num_ranks;
    a.input_chunks = plan_.input_chunks;
    a.output_chunks = plan_.output_chunks;
    a.in_place = plan_.in_place;
    a.root = plan_.root;
    std::vector<int32_t> tmp(n_, -1), next_tmp(plan_.num_ranks, plan_.scratch_chunks);
    for (int32_t id = 0; id < n_; ++id)
      if (slot(id).primitive == Primitive::RecvReduceSend) {
        tmp[id] = next_tmp[refs_[id].rank];
        next_tmp[refs_[id].rank] += slot(id).count;
      }
    a.scratch_chunks = plan_.scratch_chunks;
    for (int32_t t : next_tmp) a.scratch_chunks = std::max(a.scratch_chunks, t);
    auto add = [&](int32_t src_rank, BufferRange src, int32_t dst_rank, BufferRange dst, int32_t count, TransferOp op,
                   int64_t step) {
      if (step > INT32_MAX) fail(ErrorCode::Verify, "plan: too deep to replay");
      a.transfers.push_back({src_rank, src.buffer, src.index, dst_rank, dst.buffer, dst.index, count, op,
                             static_cast<int32_t>(step)});
    };
    for (int32_t id = 0; id < n_; ++id) {
      const Slot& s = slot(id);
      const int32_t r = refs_[id].rank;
      const int64_t step = level_[root_[id]] * width + 2 * static_cast<int64_t>(pos_[id]) + 1;
      if (s.primitive == Primitive::Copy || s.primitive == Primitive::Reduce) {
        add(r, s.src, r, s.dst, s.count, s.primitive == Primitive::Copy ? TransferOp::Copy : TransferOp::Reduce, step);
        continue;
      }
      if (!primitive_receives(s.primitive)) continue;
      int32_t x = sender_[id];
      WEFT_ASSERT(x >= 0, "a receive without a sender");
      const Slot& xs = slot(x);
      BufferRange value = xs.src;
      if (xs.primitive == Primitive::RecvCopySend || xs.primitive == Primitive::RecvReduceCopySend) value = xs.dst;
      if (xs.primitive == Primitive::RecvReduceSend) value = {Buffer::Scratch, tmp[x]};
      switch (s.primitive) {
        case Primitive::Recv:
        case Primitive::RecvCopySend:
          add(refs_[x].rank, value, r, s.dst, s.count, TransferOp::Copy, step);
          break;
        case Primitive::RecvReduceCopy:
        case Primitive::RecvReduceCopySend:
          if (!(s.src == s.dst)) add(r, s.src, r, s.dst, s.count, TransferOp::Copy, step - 1);
          add(refs_[x].rank, value, r, s.dst, s.count, TransferOp::Reduce, step);
          break;
        case Primitive::RecvReduceSend: {
          BufferRange t{Buffer::Scratch, tmp[id]};
          add(r, s.src, r, t, s.count, TransferOp::Copy, step - 1);
          add(refs_[x].rank, value, r, t, s.count, TransferOp::Reduce, step);
          break;
        }
        default: break;
      }
    }
    std::stable_sort(a.transfers.begin(), a.transfers.end(), [](const Transfer& x, const Transfer& y) { return x.step < y.step; });
    return a;
  }

  const Plan& plan_;
  const PlanIndex ix_;
  const int32_t lane_;
  int32_t n_ = 0;
  std::vector<Ref> refs_;
  std::vector<int32_t> local_, sender_, root_, level_, pos_;
  std::vector<std::vector<int32_t>> members_;
  int32_t max_pos_ = 0;
};

}  // namespace

int32_t plan_lanes(const Plan& plan) {
  int64_t lanes = 1;
  for (const RankPlan& rp : plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        if (s.instances < 1) continue;
        lanes = std::lcm(lanes, static_cast<int64_t>(s.instances));
        if (lanes > (1 << 20)) fail(ErrorCode::Verify, "plan: the instance counts split a micro-batch into too many lanes");
      }
  return static_cast<int32_t>(lanes);
}

Algorithm replay_plan(const Plan& plan, int32_t lane) {
  validate_plan(plan);
  const int32_t lanes = plan_lanes(plan);
  if (lane < 0 || lane >= lanes) fail(ErrorCode::InvalidArgument, text::format("lane %d out of range [0, %d)", lane, lanes));
  return LaneReplay(plan, lane, lanes).replay();
}

}  // namespace weft
