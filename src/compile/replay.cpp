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

  // Pairing is per message, and both ends of a message are the same instance of the same
  // count, so the whole plan's pairing restricted to the lane is the lane's.
  const PlanIndex ix(plan);
  const std::vector<int32_t> send_of = pair_connections_or_throw(plan, ix).send_of;
  // The slots of this lane, in (rank, thread block, slot) order; `local` maps a plan slot to it.
  std::vector<Ref> refs;
  std::vector<int32_t> local(static_cast<size_t>(ix.size()), -1);
  for (int32_t g = 0; g < ix.size(); ++g) {
    const Slot& s = ix.slot(g);
    if (s.instance != static_cast<int32_t>(static_cast<int64_t>(lane) * s.instances / lanes)) continue;
    local[static_cast<size_t>(g)] = static_cast<int32_t>(refs.size());
    refs.push_back({ix.rank(g), ix.local_tb(g), ix.index(g), g});
  }
  const int32_t n = static_cast<int32_t>(refs.size());
  auto slot = [&](int32_t id) -> const Slot& { return ix.slot(refs[id].global); };
  std::vector<int32_t> sender(n, -1);
  UnionFind ends(n);
  for (int32_t id = 0; id < n; ++id)
    if (const int32_t from = send_of[static_cast<size_t>(refs[id].global)]; from >= 0) {
      sender[id] = local[static_cast<size_t>(from)];
      WEFT_ASSERT(sender[id] >= 0, "a message's two ends in different lanes");
      ends.unite(sender[id], id);
    }
  std::vector<int32_t> root(n);
  for (int32_t i = 0; i < n; ++i) root[i] = ends.find(i);

  // Levels of merged nodes: longest path over program order and dependencies (lane-local).
  std::vector<std::vector<int32_t>> out(n);  // per slot: slots that must follow it
  for (int32_t id = 0; id < n; ++id) {
    if (id + 1 < n && refs[id + 1].rank == refs[id].rank && refs[id + 1].tb == refs[id].tb) out[id].push_back(id + 1);
    for (const SlotDep& d : slot(id).deps) {
      int32_t from = local[static_cast<size_t>(ix.dep(refs[id].global, d))];
      if (from >= 0) out[from].push_back(id);
    }
  }
  std::vector<std::vector<int32_t>> members(n);
  for (int32_t i = 0; i < n; ++i) members[root[i]].push_back(i);
  std::vector<int32_t> indeg(n, 0), level(n, 0);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j : out[i]) ++indeg[root[j]];
  std::vector<int32_t> ready;
  for (int32_t i = 0; i < n; ++i)
    if (root[i] == i && indeg[i] == 0) ready.push_back(i);
  int32_t processed = 0, roots = 0;
  for (int32_t i = 0; i < n; ++i) roots += root[i] == i;
  while (!ready.empty()) {
    int32_t u = ready.back();
    ready.pop_back();
    ++processed;
    for (int32_t m : members[u])
      for (int32_t j : out[m]) {
        int32_t v = root[j];
        if (v == u) fail(ErrorCode::Verify, "plan: a thread block waits on a transfer of its own forwarding chain");
        level[v] = std::max(level[v], level[u] + 1);
        if (--indeg[v] == 0) ready.push_back(v);
      }
  }
  if (processed != roots) fail(ErrorCode::Verify, "plan: its slots form a cycle, so it can deadlock (see check_deadlock)");

  // Position along the forwarding chain: hops from the node's first sender.
  std::vector<int32_t> pos(n, -1);
  int32_t max_pos = 0;
  for (int32_t i = 0; i < n; ++i) {
    std::vector<int32_t> path;
    int32_t x = i;
    while (pos[x] < 0 && sender[x] >= 0) {
      path.push_back(x);
      x = sender[x];
      if (path.size() > members[root[i]].size())
        fail(ErrorCode::Verify, "plan: a forwarding chain loops back on itself");
    }
    int32_t p = pos[x] >= 0 ? pos[x] : 0;
    pos[x] = p;
    for (auto it = path.rbegin(); it != path.rend(); ++it) pos[*it] = ++p;
    max_pos = std::max(max_pos, p);
  }
  const int64_t width = 2 * (static_cast<int64_t>(max_pos) + 1) + 1;

  Algorithm a;
  a.name = plan.algorithm + " (replay of lane " + std::to_string(lane) + ")";
  a.collective = plan.collective;
  a.ranks = plan.num_ranks;
  a.input_chunks = plan.input_chunks;
  a.output_chunks = plan.output_chunks;
  a.in_place = plan.in_place;
  a.root = plan.root;
  std::vector<int32_t> tmp(n, -1), next_tmp(plan.num_ranks, plan.scratch_chunks);
  for (int32_t id = 0; id < n; ++id)
    if (slot(id).primitive == Primitive::RecvReduceSend) {
      tmp[id] = next_tmp[refs[id].rank];
      next_tmp[refs[id].rank] += slot(id).count;
    }
  a.scratch_chunks = plan.scratch_chunks;
  for (int32_t t : next_tmp) a.scratch_chunks = std::max(a.scratch_chunks, t);
  auto add = [&](int32_t src_rank, BufferRange src, int32_t dst_rank, BufferRange dst, int32_t count, TransferOp op,
                 int64_t step) {
    if (step > INT32_MAX) fail(ErrorCode::Verify, "plan: too deep to replay");
    a.transfers.push_back({src_rank, src.buffer, src.index, dst_rank, dst.buffer, dst.index, count, op,
                           static_cast<int32_t>(step)});
  };
  for (int32_t id = 0; id < n; ++id) {
    const Slot& s = slot(id);
    const int32_t r = refs[id].rank;
    const int64_t step = level[root[id]] * width + 2 * static_cast<int64_t>(pos[id]) + 1;
    if (s.primitive == Primitive::Copy || s.primitive == Primitive::Reduce) {
      add(r, s.src, r, s.dst, s.count, s.primitive == Primitive::Copy ? TransferOp::Copy : TransferOp::Reduce, step);
      continue;
    }
    if (!primitive_receives(s.primitive)) continue;
    int32_t x = sender[id];
    WEFT_ASSERT(x >= 0, "a receive without a sender");
    const Slot& xs = slot(x);
    BufferRange value = xs.src;
    if (xs.primitive == Primitive::RecvCopySend || xs.primitive == Primitive::RecvReduceCopySend) value = xs.dst;
    if (xs.primitive == Primitive::RecvReduceSend) value = {Buffer::Scratch, tmp[x]};
    switch (s.primitive) {
      case Primitive::Recv:
      case Primitive::RecvCopySend:
        add(refs[x].rank, value, r, s.dst, s.count, TransferOp::Copy, step);
        break;
      case Primitive::RecvReduceCopy:
      case Primitive::RecvReduceCopySend:
        if (!(s.src == s.dst)) add(r, s.src, r, s.dst, s.count, TransferOp::Copy, step - 1);
        add(refs[x].rank, value, r, s.dst, s.count, TransferOp::Reduce, step);
        break;
      case Primitive::RecvReduceSend: {
        BufferRange t{Buffer::Scratch, tmp[id]};
        add(r, s.src, r, t, s.count, TransferOp::Copy, step - 1);
        add(refs[x].rank, value, r, t, s.count, TransferOp::Reduce, step);
        break;
      }
      default: break;
    }
  }
  std::stable_sort(a.transfers.begin(), a.transfers.end(), [](const Transfer& x, const Transfer& y) { return x.step < y.step; });
  return a;
}

}  // namespace weft
