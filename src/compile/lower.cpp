#include "compile/lower.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
#include <unordered_map>

#include "compile/schedule.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// An operation: a task on its link (kept apart from Task so that lowering could merge tasks).
struct Op {
  int32_t src = 0, dst = 0;
  TransferOp kind = TransferOp::Copy;
  BufferRange src_range, dst_range, acc_range;
  int32_t count = 0;
  int32_t sp = 0, channel = 0, instances = 1;
  int32_t conn_instances = 1;  ///< its connection's count (more than `instances` for a NIC-fed op)
  int32_t first_block = 0;     ///< the first of the connection's blocks it runs on (op_blocks)
  int64_t key = 0;       ///< pipeline position of its task
  int32_t tasks_begin = 0, tasks_end = 0;
  int32_t unit = -1;
  int32_t chain_prev = -1;  ///< the op whose receiving end this op's sending end is fused with
  int32_t send_slot = -1, recv_slot = -1;
  bool recv_fused = false;
};

/// CompileOptions::op_order: a topological order of the task graph (order[task] = position),
/// the lowest key first among the tasks whose predecessors have all come, ties by `pos` (the
/// schedule's order). A task takes its first transfer's key, or, with none, its latest
/// predecessor's.
std::vector<int32_t> keyed_order(const TaskGraph& g, const std::vector<int32_t>& pos, const std::vector<double>& keys) {
  const int32_t n = g.size();
  std::vector<int32_t> by_pos(static_cast<size_t>(n));
  for (int32_t t = 0; t < n; ++t) by_pos[static_cast<size_t>(pos[t])] = t;
  std::vector<double> key(static_cast<size_t>(n), 0.0);
  for (int32_t t : by_pos) {
    const std::span<const int32_t> origins = g.origins_of(t);
    if (!origins.empty() && static_cast<size_t>(origins[0]) < keys.size()) {
      key[static_cast<size_t>(t)] = keys[static_cast<size_t>(origins[0])];
      continue;
    }
    double k = -1e300;
    for (const TaskEdge& e : g.edges_to(t)) k = std::max(k, key[static_cast<size_t>(e.from)]);
    key[static_cast<size_t>(t)] = k > -1e300 ? k : 0.0;
  }
  std::vector<int32_t> waiting(static_cast<size_t>(n), 0);
  std::vector<std::vector<int32_t>> next(static_cast<size_t>(n));
  for (const TaskEdge& e : g.edges) {
    ++waiting[static_cast<size_t>(e.to)];
    next[static_cast<size_t>(e.from)].push_back(e.to);
  }
  using Entry = std::pair<double, int32_t>;  // (key, schedule position)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (int32_t t = 0; t < n; ++t)
    if (waiting[static_cast<size_t>(t)] == 0) ready.push({key[static_cast<size_t>(t)], pos[t]});
  std::vector<int32_t> order(static_cast<size_t>(n), -1);
  int32_t at = 0;
  while (!ready.empty()) {
    const int32_t t = by_pos[static_cast<size_t>(ready.top().second)];
    ready.pop();
    order[static_cast<size_t>(t)] = at++;
    for (int32_t u : next[static_cast<size_t>(t)])
      if (--waiting[static_cast<size_t>(u)] == 0) ready.push({key[static_cast<size_t>(u)], pos[u]});
  }
  WEFT_ASSERT(at == n, "the task graph has a cycle");
  return order;
}

class Lowering {
 public:
  Lowering(const TaskGraph& g, const Pipeline& p, const Topology& topo, const CompileOptions& o, Instances k,
           bool step_order)
      : g_(g), p_(p), topo_(topo), opt_(o), k_(k), step_order_(step_order) {}

  /// The program, or nothing when step order (`step_order`) is no program order
  /// (assign_keys): the caller lowers again without it.
  std::optional<LoweredProgram> run() {
    out_.execution = execution_model_of(opt_);
    out_.num_subpipelines = static_cast<int32_t>(p_.subpipelines.size());
    out_.num_ranks = topo_.num_gpus();
    out_.instances_intra = k_.intra, out_.instances_inter = k_.inter, out_.instances_local = k_.local;
    order_ = pipeline_order(g_, p_);
    // CompileOptions::op_order: the program in another topological order of the graph.
    if (!opt_.op_order.empty() && out_.execution == ExecutionModel::Task) order_ = keyed_order(g_, order_, opt_.op_order);
    sp_of_ = pipeline_subpipeline_of(g_, p_);
    stage_channels_ = uses_stage_channels(opt_);
    chunk_channels_ = opt_.channels == "chunk";
    // Sub-pipelines put one task on a link at a time; fusing across them would pull a link
    // into a sub-pipeline where it is busy. With a channel per chunk (or at algorithm level)
    // a link's tasks have blocks of their own, so fusion is free there.
    fuse_within_subpipeline_ = out_.execution == ExecutionModel::Task && !chunk_channels_ &&
                               (p_.scheduler == "hpds" || p_.scheduler == "rr");
    // NIC-fed NVLink ops keep pace with the network on fewer blocks than their connection's
    // (docs/compile.md, "Paced instances"); the connection keeps its count for the others.
    // (The rank allocator shares one block per instance count, which would put a connection's
    // instance on two blocks: it takes no pacing.)
    if (opt_.pace > 0 && out_.execution == ExecutionModel::Task && opt_.allocator != "rank") {
      nic_fed_ = nic_fed_tasks(g_, p_);
      nic_fed_k_ = nic_fed_instances(g_, topo_, nic_fed_, k_, opt_.pace);
    }
    // Ops placed on some of their connection's blocks (docs/compile.md, "Ops on fewer
    // blocks"); the rank allocator, like pacing, takes none.
    use_op_blocks_ = !opt_.op_blocks.empty() && out_.execution == ExecutionModel::Task && opt_.allocator != "rank";
    make_ops();
    if (!fuse_and_emit()) return std::nullopt;
    dependencies();
    return std::move(out_);
  }

 private:
  int32_t conn_instances_of(int32_t t) const {
    const Transfer& x = g_.tasks[t].transfer;
    return k_.of(x.src_rank, x.dst_rank, g_.tasks[t].link, out_.num_ranks);
  }
  int32_t instances_of(int32_t t) const {
    const int32_t k = conn_instances_of(t);
    if (nic_fed_.empty() || !nic_fed_[t] || g_.tasks[t].link != LinkClass::Intra) return k;
    const Transfer& x = g_.tasks[t].transfer;
    auto it = nic_fed_k_.find(static_cast<int64_t>(x.src_rank) * out_.num_ranks + x.dst_rank);
    return it == nic_fed_k_.end() ? k : it->second;
  }
  /// The blocks of its connection task t's op runs on: CompileOptions::op_blocks where it
  /// names the task's first transfer (clamped to the connection's count), else the first
  /// instances_of(t).
  OpBlocks blocks_of(int32_t t) const {
    if (use_op_blocks_ && g_.tasks[t].link != LinkClass::Local) {
      const std::span<const int32_t> origins = g_.origins_of(t);
      if (!origins.empty() && static_cast<size_t>(origins[0]) < opt_.op_blocks.size()) {
        const OpBlocks b = opt_.op_blocks[static_cast<size_t>(origins[0])];
        const int32_t m = conn_instances_of(t);
        if (b.count > 0) {
          const int32_t n = std::min(b.count, m);
          return {std::min(b.first, m - n), n};
        }
      }
    }
    return {0, instances_of(t)};
  }
  int32_t channel_of(int32_t t) const {
    if (chunk_channels_) return g_.tasks[t].chunk;
    return stage_channels_ ? g_.tasks[t].stage : 0;
  }

  // ---- 1. one op per task (aggregation happened before scheduling, in layout.cpp) ----
  void make_ops() {
    const int32_t n = g_.size();
    ops_.resize(n);
    op_tasks_.resize(n);
    op_of_.resize(n);
    for (int32_t t = 0; t < n; ++t) {
      const Task& k = g_.tasks[t];
      const Transfer& x = k.transfer;
      Op& o = ops_[t];
      o.src = x.src_rank, o.dst = x.dst_rank, o.kind = x.op;
      o.src_range = {x.src_buffer, x.src_index};
      o.dst_range = {x.dst_buffer, x.dst_index};
      o.acc_range = x.op == TransferOp::Reduce ? BufferRange{k.acc_buffer, k.acc_index} : o.dst_range;
      o.count = x.count;
      const OpBlocks b = blocks_of(t);
      o.sp = sp_of_[t], o.channel = channel_of(t), o.instances = b.count, o.first_block = b.first;
      o.conn_instances = conn_instances_of(t);
      o.key = order_[t];
      o.tasks_begin = t, o.tasks_end = t + 1;
      op_tasks_[t] = t;
      op_of_[t] = t;
    }
    out_.ops = n;
  }

  // ---- 2 and 3. fusion and primitives, in key order ----
  bool fuse_and_emit() {
    out_.slots.reserve(2 * ops_.size());
    slot_ops_.reserve(2 * ops_.size());
    std::vector<int32_t> by_key(ops_.size());
    std::iota(by_key.begin(), by_key.end(), 0);
    std::sort(by_key.begin(), by_key.end(), [&](int32_t a, int32_t b) { return ops_[a].key < ops_[b].key; });
    for (int32_t o : by_key) {
      Op& op = ops_[o];
      if (op.src == op.dst) {
        op.unit = new_unit(op.key);
        LoweredSlot s = base_slot(op.src, op.unit, op.sp);
        s.primitive = op.kind == TransferOp::Copy ? Primitive::Copy : Primitive::Reduce;
        s.src = op.src_range, s.dst = op.dst_range, s.count = op.count, s.instances = op.instances;
        op.send_slot = op.recv_slot = add_slot(s, o, -1);
        continue;
      }
      int32_t a = opt_.fuse ? fusion_partner(o) : -1;
      int32_t conn = connection(op.src, op.dst, op.channel, op.conn_instances);
      if (a >= 0) {
        Op& prev = ops_[a];
        op.unit = prev.unit;
        op.chain_prev = a;
        prev.recv_fused = true;
        ++unit_len_[op.unit];
        LoweredSlot& s = out_.slots[prev.recv_slot];
        s.primitive = prev.kind == TransferOp::Copy ? Primitive::RecvCopySend
                      : value_dies_in(a, o)         ? Primitive::RecvReduceSend
                                                    : Primitive::RecvReduceCopySend;
        if (s.primitive == Primitive::RecvReduceSend) s.dst = s.src;  // nothing is stored
        s.send_peer = op.dst;
        s.send_conn = conn;
        last_fed_by_[conn] = s.recv_conn;
        s.sp_first = std::min(s.sp_first, op.sp);
        s.sp_last = std::max(s.sp_last, op.sp);
        slot_ops_[prev.recv_slot].second = o;
        op.send_slot = prev.recv_slot;
        ++out_.fused;
      } else {
        op.unit = new_unit(op.key);
        LoweredSlot s = base_slot(op.src, op.unit, op.sp);
        s.primitive = Primitive::Send;
        s.src = s.dst = op.src_range;
        s.count = op.count, s.instances = op.instances, s.channel = op.channel, s.first_block = op.first_block;
        s.send_peer = op.dst, s.send_conn = conn;
        last_fed_by_[conn] = -1;
        op.send_slot = add_slot(s, -1, o);
      }
      LoweredSlot r = base_slot(op.dst, op.unit, op.sp);
      r.primitive = op.kind == TransferOp::Copy ? Primitive::Recv : Primitive::RecvReduceCopy;
      r.src = op.acc_range, r.dst = op.dst_range;
      r.count = op.count, r.instances = op.instances, r.channel = op.channel, r.first_block = op.first_block;
      r.recv_peer = op.src, r.recv_conn = conn;
      op.recv_slot = add_slot(r, o, -1);
    }
    if (!assign_keys()) return false;
    // Each slot lists the Algorithm transfers of its receiving op, then of its sending op.
    for (size_t s = 0; s < out_.slots.size(); ++s) {
      LoweredSlot& ls = out_.slots[s];
      ls.tasks_begin = static_cast<int32_t>(out_.slot_tasks.size());
      for (int32_t o : {slot_ops_[s].first, slot_ops_[s].second}) {
        if (o < 0) continue;
        for (int32_t i = ops_[o].tasks_begin; i < ops_[o].tasks_end; ++i)
          for (int32_t origin : g_.origins_of(op_tasks_[i])) out_.slot_tasks.push_back(origin);
      }
      ls.tasks_end = static_cast<int32_t>(out_.slot_tasks.size());
    }
    return true;
  }

  /// Program order: the unit's key, so that a unit runs as one pipeline; under step_order
  /// (lower.hpp) each slot's own step instead. False when step order is no program order
  /// (the ends of a connection would see its transfers in different orders, or a dependency
  /// would point forwards): the caller then lowers again without it.
  bool assign_keys() {
    for (LoweredSlot& ls : out_.slots) ls.key = unit_key_[ls.unit];
    if (!step_order_) return true;
    std::vector<int64_t> own(out_.slots.size());
    // (sub-pipeline, pure sends before receiving slots, pipeline position) of the first op.
    const int64_t n = static_cast<int64_t>(ops_.size());
    for (size_t s = 0; s < out_.slots.size(); ++s) {
      const bool head = slot_ops_[s].first < 0;
      const Op& first = ops_[head ? slot_ops_[s].second : slot_ops_[s].first];
      own[s] = (2 * static_cast<int64_t>(first.sp) + (head ? 0 : 1)) * n + first.key;
      // At task level (chunk channels): the pipeline's order, a fused slot at its later op,
      // whose dependencies on this rank must come first (HPDS may put a task and the one it
      // feeds in one sub-pipeline, so sends-before-receives would break them).
      if (out_.execution == ExecutionModel::Task) {
        own[s] = first.key;
        if (!head && slot_ops_[s].second >= 0) own[s] = std::max(own[s], ops_[slot_ops_[s].second].key);
      }
    }
    // Per connection, the ops in the sender's order and in the receiver's.
    std::vector<std::vector<std::pair<int64_t, int32_t>>> sent(out_.connections.size()), received(sent.size());
    for (size_t s = 0; s < out_.slots.size(); ++s) {
      const LoweredSlot& ls = out_.slots[s];
      if (ls.send_conn >= 0) sent[ls.send_conn].push_back({own[s], slot_ops_[s].second});
      if (ls.recv_conn >= 0) received[ls.recv_conn].push_back({own[s], slot_ops_[s].first});
    }
    for (size_t c = 0; c < sent.size(); ++c) {
      std::sort(sent[c].begin(), sent[c].end());
      std::sort(received[c].begin(), received[c].end());
      if (sent[c].size() != received[c].size()) return false;
      for (size_t i = 0; i < sent[c].size(); ++i)
        if (sent[c][i].second != received[c][i].second) return false;
    }
    for (size_t s = 0; s < out_.slots.size(); ++s)
      for (int32_t o : {slot_ops_[s].first, slot_ops_[s].second}) {
        if (o < 0) continue;
        for (int32_t i = ops_[o].tasks_begin; i < ops_[o].tasks_end; ++i)
          for (const TaskEdge& e : g_.edges_to(op_tasks_[i])) {
            if (e.rank != out_.slots[s].rank) continue;
            const int32_t from = end_slot(op_of_[e.from], e.rank);
            if (from != static_cast<int32_t>(s) && own[from] >= own[s]) return false;
          }
      }
    for (size_t s = 0; s < out_.slots.size(); ++s) out_.slots[s].key = own[s];
    out_.step_order = true;
    return true;
  }

  /// The op whose receiving end op `b`'s sending end can fuse with, or -1.
  int32_t fusion_partner(int32_t b) {
    const Op& ob = ops_[b];
    int32_t a = -1;
    for (int32_t i = ob.tasks_begin; i < ob.tasks_end; ++i) {
      int32_t t = op_tasks_[i];
      bool found = false;
      for (const TaskEdge& e : g_.edges_to(t)) {
        if (e.kind != DepKind::True || e.rank != ob.src) continue;
        int32_t o = op_of_[e.from];
        if (a >= 0 && o != a) return -1;  // the value comes from two ops
        a = o;
        found = true;
      }
      if (!found) return -1;
    }
    if (a < 0) return -1;
    const Op& oa = ops_[a];
    if (oa.src == oa.dst || oa.dst != ob.src || oa.recv_fused) return -1;
    if (!(oa.dst_range == ob.src_range) || oa.count != ob.count) return -1;
    if (oa.instances != ob.instances || oa.conn_instances != ob.conn_instances || oa.channel != ob.channel ||
        oa.first_block != ob.first_block)
      return -1;
    if (fuse_within_subpipeline_ && oa.sp != ob.sp) return -1;
    if (unit_len_[oa.unit] >= kMaxFusedChain) return -1;
    // With a channel per chunk each send has a connection (and blocks) of its own: a reduction
    // whose result other sends also forward stays apart from its first send, so that those
    // sends wait for the reduction alone and not for it and a send in one primitive
    // (ndv5-ar-4m's rrc 0<-1 and its sends to 1, 2 and 3, as the file has them).
    if (chunk_channels_ && oa.kind == TransferOp::Reduce && sent_elsewhere(a, b)) return -1;
    // The fused slot runs on the block of b's connection, after what that connection
    // carried before. Under task-level execution a receive from another connection would
    // wait behind every micro-batch of those sends while its sender stalls on full staging
    // slots, so it fuses only onto a connection that is new or that forwarded from the same
    // connection last. Algorithm-level blocks take one micro-batch of each slot in turn, so
    // there the wait is one micro-batch; it still ties a NIC's pace to NVLink's (or the
    // reverse) when either end crosses nodes, so the rule holds there too.
    const bool crosses = g_.tasks[op_tasks_[oa.tasks_begin]].link == LinkClass::Inter ||
                         g_.tasks[op_tasks_[ob.tasks_begin]].link == LinkClass::Inter;
    if (out_.execution == ExecutionModel::Task || crosses) {
      auto sent = conn_ids_.find(connection_key(ob.src, ob.dst, ob.channel));
      if (sent != conn_ids_.end() && last_fed_by_[sent->second] != out_.slots[oa.recv_slot].recv_conn) return -1;
    }
    // A unit visits each rank once (one slot per rank, all of the unit's key): walk the chain
    // back from its tail. In step order (per-slot keys) it may come back to a rank: a ring
    // AllReduce's chunk then runs as one chain of rrs, rrcs and rcs, as NCCL's ring does.
    if (!step_order_)
      for (int32_t o = a; o >= 0; o = ops_[o].chain_prev)
        if (ops_[o].src == ob.dst || ops_[o].dst == ob.dst) return -1;
    // Predecessors outside the unit must come before the unit's key. In step order every
    // slot has a key of its own and assign_keys checks each dependency against it instead.
    if (step_order_) return a;
    int64_t key = unit_key_[oa.unit];
    for (int32_t i = ob.tasks_begin; i < ob.tasks_end; ++i)
      for (int32_t q : g_.preds_of(op_tasks_[i]))
        if (ops_[op_of_[q]].unit != oa.unit && order_[q] >= key) return -1;
    return a;
  }

  /// Whether what op `a` reduces is also sent to another rank by an op other than `b`.
  bool sent_elsewhere(int32_t a, int32_t b) const {
    const Op& oa = ops_[a];
    for (int32_t i = oa.tasks_begin; i < oa.tasks_end; ++i) {
      int32_t t = op_tasks_[i];
      for (int32_t s : g_.succs_of(t))
        for (const TaskEdge& e : g_.edges_to(s))
          if (e.from == t && e.kind == DepKind::True && e.rank == oa.dst && op_of_[s] != b) {
            const Op& os = ops_[op_of_[s]];
            if (os.src != os.dst) return true;
          }
    }
    return false;
  }

  /// rrs: what op `a` reduces is read by op `b` only and later overwritten by a copy.
  bool value_dies_in(int32_t a, int32_t b) const {
    const Op& oa = ops_[a];
    for (int32_t i = oa.tasks_begin; i < oa.tasks_end; ++i) {
      int32_t t = op_tasks_[i];
      if (g_.tasks[t].dst_overwritten != g_.tasks[t].transfer.count) return false;
      for (int32_t s : g_.succs_of(t))
        for (const TaskEdge& e : g_.edges_to(s))
          if (e.from == t && e.kind == DepKind::True && e.rank == oa.dst && op_of_[s] != b) return false;
    }
    return true;
  }

  int32_t new_unit(int64_t key) {
    unit_key_.push_back(key);
    unit_len_.push_back(1);
    return static_cast<int32_t>(unit_key_.size()) - 1;
  }
  LoweredSlot base_slot(int32_t rank, int32_t unit, int32_t sp) const {
    LoweredSlot s;
    s.rank = rank;
    s.unit = unit;
    s.sp_first = s.sp_last = sp;
    return s;
  }
  int32_t add_slot(const LoweredSlot& s, int32_t recv_op, int32_t send_op) {
    out_.slots.push_back(s);
    slot_ops_.push_back({recv_op, send_op});
    return static_cast<int32_t>(out_.slots.size()) - 1;
  }
  int64_t connection_key(int32_t src, int32_t dst, int32_t channel) const {
    return (static_cast<int64_t>(src) * out_.num_ranks + dst) * (std::max(g_.num_stages, g_.num_chunks) + 1) + channel;
  }
  int32_t connection(int32_t src, int32_t dst, int32_t channel, int32_t instances) {
    auto [it, fresh] = conn_ids_.emplace(connection_key(src, dst, channel), static_cast<int32_t>(out_.connections.size()));
    if (fresh) {
      out_.connections.push_back({src, dst, channel, instances});
      last_fed_by_.push_back(-1);
    }
    return it->second;
  }

  // ---- 4. per-micro-batch dependencies ----
  int32_t end_slot(int32_t o, int32_t rank) const {
    const Op& op = ops_[o];
    if (op.src == rank) return op.send_slot;
    WEFT_ASSERT(op.dst == rank, "a data edge names a rank its task does not touch");
    return op.recv_slot;
  }
  void dependencies() {
    // A slot waits on the slots (same rank) holding the other end of each data edge into the
    // tasks it implements at that rank.
    std::vector<int32_t> deps;
    out_.slot_deps.reserve(out_.slots.size() * 2);
    for (size_t s = 0; s < out_.slots.size(); ++s) {
      LoweredSlot& ls = out_.slots[s];
      deps.clear();
      for (int32_t o : {slot_ops_[s].first, slot_ops_[s].second}) {
        if (o < 0) continue;
        for (int32_t i = ops_[o].tasks_begin; i < ops_[o].tasks_end; ++i)
          for (const TaskEdge& e : g_.edges_to(op_tasks_[i])) {
            if (e.rank != ls.rank) continue;
            int32_t from = end_slot(op_of_[e.from], e.rank);
            if (from == static_cast<int32_t>(s)) continue;
            WEFT_ASSERT(out_.slots[from].key < ls.key, "a dependency points backwards in program order");
            deps.push_back(from);
          }
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      ls.deps_begin = static_cast<int32_t>(out_.slot_deps.size());
      out_.slot_deps.insert(out_.slot_deps.end(), deps.begin(), deps.end());
      ls.deps_end = static_cast<int32_t>(out_.slot_deps.size());
    }
  }

  const TaskGraph& g_;
  const Pipeline& p_;
  const Topology& topo_;
  const CompileOptions& opt_;
  const Instances k_;
  const bool step_order_;
  LoweredProgram out_;
  std::vector<int32_t> order_, sp_of_;
  bool stage_channels_ = false, chunk_channels_ = false, fuse_within_subpipeline_ = false, use_op_blocks_ = false;
  std::vector<Op> ops_;
  std::vector<int32_t> op_tasks_, op_of_;
  std::vector<int64_t> unit_key_;
  std::vector<int32_t> unit_len_;
  std::vector<std::pair<int32_t, int32_t>> slot_ops_;  // per slot: (receiving op, sending op)
  std::unordered_map<int64_t, int32_t> conn_ids_;
  std::vector<int32_t> last_fed_by_;  // per connection: the receive connection its last send forwarded, or -1
  std::vector<char> nic_fed_;                           // per task, with CompileOptions::pace
  std::unordered_map<int64_t, int32_t> nic_fed_k_;      // per connection, its NIC-fed ops' count
};

}  // namespace

ExecutionModel execution_model_of(std::string_view scheduler) {
  return scheduler == "algo" || scheduler == "stage" ? ExecutionModel::Algorithm : ExecutionModel::Task;
}

ExecutionModel execution_model_of(const CompileOptions& options) {
  if (options.execution.empty()) return execution_model_of(options.scheduler);
  if (options.execution == "task") return ExecutionModel::Task;
  if (options.execution == "algorithm") return ExecutionModel::Algorithm;
  fail(ErrorCode::InvalidArgument, "unknown execution '" + options.execution + "' (known: task, algorithm)");
}

bool uses_stage_channels(const CompileOptions& options) {
  return options.scheduler == "stage" || options.allocator == "conn";
}

LoweredProgram lower(const TaskGraph& graph, const Pipeline& pipeline, const Topology& topo,
                     const CompileOptions& options, Instances instances, bool step_order) {
  if (instances.intra < 1 || instances.inter < 1 || instances.local < 1)
    fail(ErrorCode::Internal, "lower: instances must be at least 1");
  // Step order first lets a unit revisit ranks; where that gives no program order, it lowers
  // with unit keys as task level does.
  // At task level only with a channel per chunk: a block then holds one chunk's slots of a
  // connection, so no receive waits there behind another connection's sends.
  if (step_order && (execution_model_of(options) == ExecutionModel::Algorithm || options.channels == "chunk"))
    if (auto p = Lowering(graph, pipeline, topo, options, instances, true).run()) return std::move(*p);
  return std::move(*Lowering(graph, pipeline, topo, options, instances, false).run());
}

}  // namespace weft
