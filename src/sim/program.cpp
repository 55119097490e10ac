#include "sim/program.hpp"

#include <algorithm>
#include <unordered_map>

#include "ir/plan_core.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

std::string Program::describe_slot(int32_t slot) const {
  const ProgSlot& s = slots[static_cast<size_t>(slot)];
  const ProgTb& t = tbs[static_cast<size_t>(s.tb)];
  return text::format("rank %d tb %d slot %d (%s)", t.rank, t.local, s.local, std::string(to_string(s.prim)).c_str());
}

namespace {

[[noreturn]] void bad_slot(int32_t rank, size_t tb, size_t slot, const std::string& what) {
  fail(ErrorCode::Verify, text::format("plan: rank %d tb %zu slot %zu: ", rank, tb, slot) + what);
}

uint64_t resource_key(ResourceId r) {
  return (static_cast<uint64_t>(r.kind) << 56) ^ static_cast<uint64_t>(r.index);
}

bool is_link_kind(ResourceKind k) {
  return k != ResourceKind::NvlinkEgress && k != ResourceKind::NvlinkIngress;
}

/// Global numbering of thread blocks and slots; returns each rank's first block (and the
/// total after the last rank).
std::vector<int32_t> number_blocks(const Plan& plan, Program& p) {
  size_t n_slots = 0, n_tbs = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    n_tbs += plan.ranks[r].tbs.size();
    for (const ThreadBlock& tb : plan.ranks[r].tbs) n_slots += tb.slots.size();
  }
  if (n_slots >= (1ull << 31) || n_tbs >= (1ull << 31)) fail(ErrorCode::Verify, "plan: too many slots to simulate");
  p.plan_tbs = static_cast<int64_t>(n_tbs);
  p.plan_slots = static_cast<int64_t>(n_slots);
  p.slots.reserve(n_slots);
  p.tbs.reserve(n_tbs);
  std::vector<int32_t> rank_first_tb(plan.ranks.size() + 1, 0);
  int32_t next = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    rank_first_tb[r] = static_cast<int32_t>(p.tbs.size());
    p.rank_tbs.push_back(static_cast<int32_t>(plan.ranks[r].tbs.size()));
    for (size_t t = 0; t < plan.ranks[r].tbs.size(); ++t) {
      ProgTb tb;
      tb.rank = static_cast<int32_t>(r);
      tb.local = static_cast<int32_t>(t);
      tb.slot_begin = next;
      next += static_cast<int32_t>(plan.ranks[r].tbs[t].slots.size());
      tb.slot_end = next;
      p.tbs.push_back(tb);
    }
  }
  rank_first_tb[plan.ranks.size()] = static_cast<int32_t>(p.tbs.size());
  return rank_first_tb;
}

/// The program's resources and connections, made on first use from the topology.
class ConnTable {
 public:
  ConnTable(const Topology& topo, Program& p, size_t nranks) : topo_(topo), p_(p), conns_from_(nranks) {}

  int32_t resource_of(ResourceId id) {
    auto [it, fresh] = res_ids_.try_emplace(resource_key(id), static_cast<int32_t>(p_.resources.size()));
    if (fresh) {
      ProgResource res;
      res.id = id;
      res.capacity_GBps = topo_.bandwidth_GBps(id);
      res.is_link = is_link_kind(id.kind);
      if (!(res.capacity_GBps > 0))
        fail(ErrorCode::InvalidArgument, "topology " + topo_.name + ": " + topo_.resource_name(id) + " has no bandwidth");
      p_.resources.push_back(res);
    }
    return it->second;
  }

  int32_t conn_of(int32_t src, int32_t dst, int32_t channel) {
    std::vector<int32_t>& mine = conns_from_[static_cast<size_t>(src)];
    for (int32_t id : mine) {
      const ProgConn& c = p_.conns[static_cast<size_t>(id)];
      if (c.dst == dst && c.channel == channel) return id;
    }
    ProgConn c;
    c.src = src;
    c.dst = dst;
    c.channel = channel;
    c.res_begin = static_cast<uint32_t>(p_.conn_res.size());
    for (ResourceId id : topo_.route(src, dst)) p_.conn_res.push_back(resource_of(id));
    c.res_end = static_cast<uint32_t>(p_.conn_res.size());
    c.latency_us = topo_.latency_us(src, dst);
    c.cap_GBps = topo_.tb_rate_GBps(src, dst);
    if (!(c.cap_GBps > 0))
      fail(ErrorCode::InvalidArgument, text::format("topology %s: no per-thread-block rate for GPU %d -> %d", topo_.name.c_str(), src, dst));
    p_.conns.push_back(c);
    mine.push_back(static_cast<int32_t>(p_.conns.size()) - 1);
    return mine.back();
  }

 private:
  const Topology& topo_;
  Program& p_;
  std::unordered_map<uint64_t, int32_t> res_ids_;
  /// Connections by source rank: a rank has few, so a linear search beats hashing.
  std::vector<std::vector<int32_t>> conns_from_;
};

/// Every slot of the plan, with its dependencies and connections.
void add_slots(const Plan& plan, const std::vector<int32_t>& rank_first_tb, ConnTable& conns, Program& p) {
  struct LastConn {
    int32_t src = -1, dst = -1, channel = -1, id = -1;
  } last_send, last_recv;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan& rp = plan.ranks[r];
    const int32_t rank = static_cast<int32_t>(r);
    for (size_t t = 0; t < rp.tbs.size(); ++t) {
      const int32_t gtb = rank_first_tb[r] + static_cast<int32_t>(t);
      for (size_t s = 0; s < rp.tbs[t].slots.size(); ++s) {
        const Slot& sl = rp.tbs[t].slots[s];
        ProgSlot ps;
        ps.prim = sl.primitive;
        ps.tb = gtb;
        ps.local = static_cast<int32_t>(s);
        if (sl.channel >= (1 << 21)) bad_slot(rank, t, s, text::format("channel %d is out of range", sl.channel));
        ps.scale = static_cast<double>(sl.count) / static_cast<double>(sl.instances);
        ps.traffic = CostModel::local_traffic_factor(sl.primitive);
        ps.dep_begin = static_cast<uint32_t>(p.deps.size());
        for (const SlotDep& d : sl.deps)
          p.deps.push_back(p.tbs[static_cast<size_t>(rank_first_tb[r] + d.tb)].slot_begin + d.slot);
        ps.dep_end = static_cast<uint32_t>(p.deps.size());
        if (primitive_sends(sl.primitive)) {
          // Consecutive slots of a block mostly use one connection: remember the last.
          if (last_send.src != rank || last_send.dst != sl.send_peer || last_send.channel != sl.channel)
            last_send = {rank, sl.send_peer, sl.channel, conns.conn_of(rank, sl.send_peer, sl.channel)};
          ps.send_conn = last_send.id;
          p.conns[static_cast<size_t>(ps.send_conn)].sender_tb = gtb;
        }
        if (primitive_receives(sl.primitive)) {
          if (last_recv.src != sl.recv_peer || last_recv.dst != rank || last_recv.channel != sl.channel)
            last_recv = {sl.recv_peer, rank, sl.channel, conns.conn_of(sl.recv_peer, rank, sl.channel)};
          ps.recv_conn = last_recv.id;
          p.conns[static_cast<size_t>(ps.recv_conn)].receiver_tb = gtb;
        }
        p.slots.push_back(ps);
      }
    }
  }
}

/// Which resources can saturate: add up the per-TB rates of the distinct thread blocks
/// sending through each (a block drives one flow at a time).
void mark_saturable(Program& p) {
  std::vector<std::pair<int64_t, double>> uses;  // (resource << 32 | tb, rate)
  uses.reserve(p.conn_res.size());
  for (const ProgConn& c : p.conns) {
    if (c.sender_tb < 0) continue;
    for (uint32_t i = c.res_begin; i < c.res_end; ++i)
      uses.emplace_back((static_cast<int64_t>(p.conn_res[i]) << 32) | c.sender_tb, c.cap_GBps);
  }
  std::sort(uses.begin(), uses.end());
  std::vector<double> demand(p.resources.size(), 0.0);
  for (size_t i = 0; i < uses.size(); ++i) {
    // Keep the largest rate per (resource, block): it sorts last among equal keys.
    if (i + 1 < uses.size() && uses[i + 1].first == uses[i].first) continue;
    demand[static_cast<size_t>(uses[i].first >> 32)] += uses[i].second;
  }
  for (size_t r = 0; r < p.resources.size(); ++r) {
    p.resources[r].demand_GBps = demand[r];
    p.resources[r].saturable = demand[r] > p.resources[r].capacity_GBps * (1.0 + 1e-12);
  }
}

}  // namespace

Program build_program(const Plan& plan, const Topology& topo, bool merge_instances) {
  Program p;
  p.execution = plan.execution;
  p.collective = plan.collective;
  p.num_ranks = plan.num_ranks;
  p.chunks = std::max(plan.input_chunks, plan.output_chunks);
  if (plan.num_ranks != topo.num_gpus())
    fail(ErrorCode::InvalidArgument, text::format("plan '%s' has %d ranks but topology %s has %d GPUs", plan.algorithm.c_str(),
                                                  plan.num_ranks, topo.name.c_str(), topo.num_gpus()));
  // The structural rules and the pairing of connection ends are the core's (ir/plan_core.hpp).
  validate_plan(plan);
  pair_connections_or_throw(plan, PlanIndex(plan));
  if (p.chunks <= 0) fail(ErrorCode::Verify, "plan: no chunk slots (input_chunks and output_chunks are 0)");
  if (p.chunks > (1 << 30)) fail(ErrorCode::Verify, text::format("plan: %d chunk slots is too many", p.chunks));

  const std::vector<int32_t> rank_first_tb = number_blocks(plan, p);
  ConnTable conns(topo, p, plan.ranks.size());
  add_slots(plan, rank_first_tb, conns, p);
  mark_saturable(p);
  if (merge_instances) p = merge_instance_siblings(plan, std::move(p));
  p.dep_tbs.resize(p.deps.size());
  for (size_t i = 0; i < p.deps.size(); ++i) p.dep_tbs[i] = p.slots[static_cast<size_t>(p.deps[i])].tb;
  return p;
}

}  // namespace weft::sim
