// Thread blocks per connection (instances), derived from the topology and the schedule
// (lower.hpp, derive_instances; docs/compile.md, "Instances").
#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>

#include "compile/lower.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

int64_t link_key(int32_t src, int32_t dst, int32_t ranks) { return static_cast<int64_t>(src) * ranks + dst; }

double local_rate(const Topology& topo) { return topo.tb_local_GBps > 0 ? topo.tb_local_GBps : 4 * topo.tb_copy_GBps; }

/// HBM bytes a local operation moves per chunk: a copy reads and writes, a reduction reads two.
double local_traffic(const Transfer& x) { return (x.op == TransferOp::Copy ? 2.0 : 3.0) * x.count; }

/// Blocks that move `rate` at `tb` each, rounded up, between 1 and `cap`.
int32_t blocks_for(double rate_GBps, double tb_GBps, int32_t cap) {
  if (rate_GBps <= 0 || tb_GBps <= 0) return 1;
  const double k = std::ceil(rate_GBps / tb_GBps - 1e-9);
  return static_cast<int32_t>(std::clamp(k, 1.0, static_cast<double>(cap)));
}

/// The tasks of each phase: sub-pipelines (task level) or runs of one step (algorithm level).
std::vector<std::vector<int32_t>> phases_of(const TaskGraph& g, const Pipeline& p) {
  if (execution_model_of(p.scheduler) == ExecutionModel::Task) return p.subpipelines;
  std::vector<std::vector<int32_t>> phases;
  for (int32_t t = 0; t < g.size(); ++t) {
    if (t == 0 || g.tasks[t].transfer.step != g.tasks[t - 1].transfer.step) phases.emplace_back();
    phases.back().push_back(t);
  }
  return phases;
}

/// One node: per phase, the time its busiest GPU port (or GPU's HBM) needs; each connection
/// and each rank's local operations get the blocks that keep up with it.
Instances phase_paced(const TaskGraph& g, const Pipeline& p, const Topology& topo) {
  const int32_t R = topo.num_gpus();
  const int32_t fill = link_fill_blocks(topo, LinkClass::Intra);
  Instances k;
  std::vector<double> egress(R, 0), ingress(R, 0), hbm(R, 0);
  std::unordered_map<int64_t, double> chunks, op_traffic;
  for (const std::vector<int32_t>& phase : phases_of(g, p)) {
    std::fill(egress.begin(), egress.end(), 0.0);
    std::fill(ingress.begin(), ingress.end(), 0.0);
    std::fill(hbm.begin(), hbm.end(), 0.0);
    chunks.clear();
    op_traffic.clear();
    for (int32_t t : phase) {
      const Transfer& x = g.tasks[t].transfer;
      const int64_t key = link_key(x.src_rank, x.dst_rank, R);
      if (g.tasks[t].link == LinkClass::Local) {
        hbm[x.src_rank] += local_traffic(x);
        double& most = op_traffic[key];
        most = std::max(most, local_traffic(x));
      } else {
        egress[x.src_rank] += x.count;
        ingress[x.dst_rank] += x.count;
        chunks[key] += x.count;
      }
    }
    double bound = 0;  // the phase's time, in chunks / (GB/s)
    for (int32_t r = 0; r < R; ++r) {
      if (topo.nvlink_bandwidth_GBps > 0) bound = std::max(bound, std::max(egress[r], ingress[r]) / topo.nvlink_bandwidth_GBps);
      if (topo.hbm_bandwidth_GBps > 0) bound = std::max(bound, hbm[r] / topo.hbm_bandwidth_GBps);
    }
    if (bound <= 0) continue;
    for (const auto& [key, c] : chunks) {
      int32_t& n = k.per_link[key];
      n = std::max(n, blocks_for(c / bound, topo.tb_copy_GBps, fill));
      k.intra = std::max(k.intra, n);
    }
    for (const auto& [key, traffic] : op_traffic) {
      int32_t& n = k.per_link[key];
      n = std::max(n, blocks_for(traffic / bound, local_rate(topo), kMaxDerivedInstances));
      k.local = std::max(k.local, n);
    }
  }
  return k;
}

/// Per class, the concurrency rule: a link's bandwidth shared by the most transfers it
/// carries in one phase, over the per-block rate; local operations keep pace with the
/// fastest connection within the HBM the most local operations of one GPU share.
Instances concurrency_instances(const TaskGraph& g, const Pipeline& p, const Topology& topo) {
  const int32_t gpus = topo.num_gpus();
  const int32_t nics = std::max(1, topo.nodes * topo.nics_per_node);
  std::vector<int32_t> egress(gpus, 0), ingress(gpus, 0), local(gpus, 0), tx(nics, 0), rx(nics, 0);
  int32_t max_port = 0, max_nic = 0, max_local = 0;
  for (const std::vector<int32_t>& phase : phases_of(g, p)) {
    std::fill(egress.begin(), egress.end(), 0);
    std::fill(ingress.begin(), ingress.end(), 0);
    std::fill(local.begin(), local.end(), 0);
    std::fill(tx.begin(), tx.end(), 0);
    std::fill(rx.begin(), rx.end(), 0);
    for (int32_t t : phase) {
      const Transfer& x = g.tasks[t].transfer;
      if (g.tasks[t].link == LinkClass::Intra) {
        max_port = std::max({max_port, ++egress[x.src_rank], ++ingress[x.dst_rank]});
      } else if (g.tasks[t].link == LinkClass::Inter) {
        max_nic = std::max({max_nic, ++tx[topo.nic_of(x.src_rank)], ++rx[topo.nic_of(x.dst_rank)]});
      } else {
        max_local = std::max(max_local, ++local[x.src_rank]);
      }
    }
  }
  Instances k;
  const double port_rate = max_port > 0 ? topo.nvlink_bandwidth_GBps / max_port : 0;
  const double nic_rate = max_nic > 0 ? topo.nic_bandwidth_GBps / max_nic : 0;
  k.intra = blocks_for(port_rate, topo.tb_copy_GBps, kMaxDerivedInstances);
  k.inter = blocks_for(nic_rate, topo.tb_net_GBps, kMaxDerivedInstances);
  if (max_local > 0) {
    const double pace = std::max(port_rate, nic_rate);
    double traffic = pace > 0 ? 2 * pace : topo.hbm_bandwidth_GBps;
    if (topo.hbm_bandwidth_GBps > 0) traffic = std::min(traffic, topo.hbm_bandwidth_GBps / max_local);
    k.local = blocks_for(traffic, local_rate(topo), kMaxDerivedInstances);
  }
  return k;
}

/// Across nodes, the chunks / (GB/s) of the busiest NIC side or GPU port: proportional to
/// the time below which the call cannot end; `which` (when given) says which of the two.
double call_bound(const TaskGraph& g, const Topology& topo, LinkClass* which = nullptr) {
  const int32_t gpus = topo.num_gpus();
  const int32_t nics = std::max(1, topo.nodes * topo.nics_per_node);
  std::vector<double> egress(gpus, 0), ingress(gpus, 0), tx(nics, 0), rx(nics, 0);
  for (const Task& t : g.tasks) {
    const Transfer& x = t.transfer;
    if (t.link == LinkClass::Local) continue;
    if (t.link == LinkClass::Intra) {
      egress[x.src_rank] += x.count;
      ingress[x.dst_rank] += x.count;
    } else {
      tx[topo.nic_of(x.src_rank)] += x.count;
      rx[topo.nic_of(x.dst_rank)] += x.count;
    }
  }
  double port = 0, nic = 0;
  for (int32_t i = 0; i < gpus; ++i)
    if (topo.nvlink_bandwidth_GBps > 0) port = std::max(port, std::max(egress[i], ingress[i]) / topo.nvlink_bandwidth_GBps);
  for (int32_t i = 0; i < nics; ++i)
    if (topo.nic_bandwidth_GBps > 0) nic = std::max(nic, std::max(tx[i], rx[i]) / topo.nic_bandwidth_GBps);
  if (which) *which = nic > port ? LinkClass::Inter : port > 0 ? LinkClass::Intra : LinkClass::Local;
  return std::max(port, nic);
}

/// Across nodes: the call cannot end before its busiest NIC side or GPU port has moved its
/// chunks (T); a connection carrying b chunks gets the blocks that move them in T, never
/// more than its class's concurrency count.
Instances paced_instances(const TaskGraph& g, const Pipeline& p, const Topology& topo) {
  Instances k = concurrency_instances(g, p, topo);
  const int32_t gpus = topo.num_gpus();
  std::unordered_map<int64_t, double> conn;
  for (const Task& t : g.tasks)
    if (t.link != LinkClass::Local) conn[link_key(t.transfer.src_rank, t.transfer.dst_rank, gpus)] += t.transfer.count;
  const double bound = call_bound(g, topo);
  if (bound <= 0) return k;
  int32_t most_intra = 1, most_inter = 1;
  for (const auto& [key, chunks] : conn) {
    const int32_t src = static_cast<int32_t>(key / gpus), dst = static_cast<int32_t>(key % gpus);
    const bool intra = topo.same_node(src, dst);
    const double tb = intra ? topo.tb_copy_GBps : topo.tb_net_GBps;
    const int32_t cap = intra ? k.intra : k.inter;
    const int32_t n = tb > 0 ? blocks_for(chunks / bound, tb, cap) : cap;
    k.per_link[key] = n;
    (intra ? most_intra : most_inter) = std::max(intra ? most_intra : most_inter, n);
  }
  k.intra = most_intra;
  k.inter = most_inter;
  return k;
}

}  // namespace

int32_t Instances::of(int32_t src, int32_t dst, LinkClass link, int32_t ranks) const {
  if (!per_link.empty()) {
    auto it = per_link.find(link_key(src, dst, ranks));
    if (it != per_link.end()) return it->second;
  }
  switch (link) {
    case LinkClass::Local: return local;
    case LinkClass::Intra: return intra;
    case LinkClass::Inter: return inter;
  }
  return 1;
}

int32_t link_fill_blocks(const Topology& topo, LinkClass link) {
  if (link == LinkClass::Inter) return blocks_for(topo.nic_bandwidth_GBps, topo.tb_net_GBps, 64);
  if (link == LinkClass::Local) return kMaxDerivedInstances;
  return blocks_for(topo.nvlink_bandwidth_GBps, topo.tb_copy_GBps, 64);
}

Instances derive_instances(const TaskGraph& g, const Pipeline& p, const Topology& topo, int32_t override_instances) {
  if (override_instances > 0) return {override_instances, override_instances, override_instances, {}};
  bool crosses = false;
  for (const Task& t : g.tasks) crosses = crosses || t.link == LinkClass::Inter;
  return crosses ? paced_instances(g, p, topo) : phase_paced(g, p, topo);
}

std::vector<char> nic_fed_tasks(const TaskGraph& g, const Pipeline& p) {
  std::vector<char> fed(static_cast<size_t>(g.size()), 0);
  // The pipeline's order respects every data edge, so a task's producers are decided first.
  for (const std::vector<int32_t>& sp : p.subpipelines)
    for (int32_t t : sp) {
      if (g.tasks[t].link == LinkClass::Inter) continue;
      for (const TaskEdge& e : g.edges_to(t))
        if (e.kind == DepKind::True && (g.tasks[e.from].link == LinkClass::Inter || fed[e.from])) fed[t] = 1;
    }
  return fed;
}

std::unordered_map<int64_t, int32_t> nic_fed_instances(const TaskGraph& g, const Topology& topo,
                                                       const std::vector<char>& fed, const Instances& k, double load) {
  std::unordered_map<int64_t, int32_t> out;
  const double bound = call_bound(g, topo);
  if (bound <= 0 || topo.tb_copy_GBps <= 0) return out;
  // Per NVLink connection: chunks its NIC-fed ops carry (F) and its other ops (U).
  std::unordered_map<int64_t, std::pair<double, double>> chunks;
  const int32_t gpus = topo.num_gpus();
  for (int32_t t = 0; t < g.size(); ++t) {
    const Task& x = g.tasks[t];
    if (x.link != LinkClass::Intra) continue;
    auto& [f, u] = chunks[link_key(x.transfer.src_rank, x.transfer.dst_rank, gpus)];
    (fed[t] ? f : u) += x.transfer.count;
  }
  // Block i < n carries U / m + F / n chunks (m the connection's count), the others U / m;
  // each moves at most load * bound * tb_copy_GBps chunks (bound: the call's time), so n is the smallest
  // divisor of m with U / m + F / n within that, else m.
  const double per_block = load * bound * topo.tb_copy_GBps;
  for (const auto& [key, fu] : chunks) {
    const auto [f, u] = fu;
    if (f <= 0) continue;
    const int32_t m = k.of(static_cast<int32_t>(key / gpus), static_cast<int32_t>(key % gpus), LinkClass::Intra, gpus);
    int32_t n = 1;
    while (n < m && (m % n != 0 || u / m + f / n > per_block * (1 + 1e-9))) ++n;
    out[key] = n;
  }
  return out;
}

LinkClass bounding_link(const TaskGraph& graph, const Topology& topo) {
  LinkClass which = LinkClass::Local;
  call_bound(graph, topo, &which);
  return which;
}

int64_t parts_needed(const Instances& k) {
  int64_t l = std::lcm(std::lcm<int64_t>(k.intra, k.inter), int64_t{k.local});
  for (const auto& [key, n] : k.per_link) l = std::lcm(l, int64_t{n});
  return l;
}

namespace {

/// The smallest divisor of m at least n (m when n > m).
int32_t divisor_at_least(int32_t m, int32_t n) {
  if (n >= m) return m;
  while (m % n != 0) ++n;
  return n;
}

/// For one class, the count m in [most/2, most] whose divisors fit its connections' needs
/// best: blocks added by rounding up, plus four times the blocks a connection loses where m
/// is below its need.
int32_t best_class_count(int32_t most, const std::vector<int32_t>& needs) {
  int32_t best = most;
  int64_t best_cost = INT64_MAX;
  for (int32_t m = most; m >= std::max(1, (most + 1) / 2); --m) {
    int64_t cost = 0;
    for (int32_t n : needs) cost += n > m ? 4 * (n - m) : divisor_at_least(m, n) - n;
    if (cost < best_cost) best = m, best_cost = cost;
  }
  return best;
}

}  // namespace

Instances within_parts(Instances k, int64_t max_parts, const Topology& topo) {
  if (parts_needed(k) <= max_parts) return k;
  const int32_t ranks = topo.num_gpus();
  auto class_of = [&](int64_t key) -> int32_t* {
    const int32_t src = static_cast<int32_t>(key / ranks), dst = static_cast<int32_t>(key % ranks);
    return src == dst ? &k.local : topo.same_node(src, dst) ? &k.intra : &k.inter;
  };
  // Each class's count chosen for its connections, then each connection's count raised to
  // the next divisor of it: the parts are the three class counts' least common multiple.
  for (int32_t* cls : {&k.intra, &k.inter, &k.local}) {
    std::vector<int32_t> needs;
    for (const auto& [key, n] : k.per_link)
      if (class_of(key) == cls) needs.push_back(n);
    if (!needs.empty()) *cls = best_class_count(*cls, needs);
  }
  for (;;) {
    for (auto& [key, n] : k.per_link) n = divisor_at_least(*class_of(key), n);
    if (parts_needed(k) <= max_parts) return k;
    int32_t* largest = &k.intra;
    if (k.inter > *largest) largest = &k.inter;
    if (k.local > *largest) largest = &k.local;
    if (*largest <= 1) return k;
    --*largest;
  }
}

Instances scale_instances(const Instances& k, double intra, double inter, double local, const Topology& topo) {
  auto scale = [](int32_t x, double f) { return static_cast<int32_t>(std::clamp(std::round(x * f), 1.0, 64.0)); };
  Instances s{scale(k.intra, intra), scale(k.inter, inter), scale(k.local, local), {}};
  const int32_t ranks = topo.num_gpus();
  for (const auto& [key, n] : k.per_link) {
    const int32_t src = static_cast<int32_t>(key / ranks), dst = static_cast<int32_t>(key % ranks);
    s.per_link[key] = scale(n, src == dst ? local : topo.same_node(src, dst) ? intra : inter);
  }
  return s;
}

Instances fewer_instances(const Instances& k, int32_t tbs, int32_t max_tbs) {
  // Thread blocks grow about linearly with instances: scale every count by max_tbs / tbs,
  // rounding down, and take at least one from the largest so that every step shrinks.
  const double f = static_cast<double>(max_tbs) / std::max(tbs, 1);
  auto scale = [f](int32_t x) { return std::max<int32_t>(1, static_cast<int32_t>(std::floor(x * f))); };
  Instances s{scale(k.intra), scale(k.inter), scale(k.local), {}};
  for (const auto& [key, n] : k.per_link) s.per_link[key] = scale(n);
  if (s == k) {
    int32_t largest = std::max({s.intra, s.inter, s.local});
    for (const auto& [key, n] : s.per_link) largest = std::max(largest, n);
    if (largest > 1) {
      for (int32_t* x : {&s.intra, &s.inter, &s.local})
        if (*x == largest) --*x;
      for (auto& [key, n] : s.per_link)
        if (n == largest) --n;
    }
  }
  return s;
}

}  // namespace weft
