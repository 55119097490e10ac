// Helpers for the simulator's tests: hand-built topologies and plans.
#pragma once

#include <initializer_list>
#include <vector>

#include "ir/plan.hpp"
#include "ir/topology.hpp"

namespace weft::sim::testing {

/// `nodes` x `gpus` GPUs, one NIC per `gpus_per_nic` GPUs, round figures for closed forms.
inline Topology test_topology(int nodes, int gpus, int gpus_per_nic = 2) {
  Topology t;
  t.name = "test";
  t.gpu = "test";
  t.nodes = nodes;
  t.gpus_per_node = gpus;
  if (nodes > 1) {
    t.nics_per_node = (gpus + gpus_per_nic - 1) / gpus_per_nic;
    for (int g = 0; g < gpus; ++g) t.nic_of_gpu.push_back(g / gpus_per_nic);
  }
  t.nvlink_bandwidth_GBps = 300;
  t.nvlink_latency_us = 2;
  t.nic_bandwidth_GBps = 25;
  t.nic_latency_us = 5;
  t.tb_copy_GBps = 20;
  t.tb_net_GBps = 10;
  t.tb_local_GBps = 80;
  t.hbm_bandwidth_GBps = 2000;
  t.primitive_overhead_us = 1;
  t.contention_gamma = 0.3;
  return t;
}

/// Builds a plan slot by slot.
class PlanBuilder {
 public:
  PlanBuilder(int ranks, int chunks = 1, ExecutionModel exec = ExecutionModel::Task) {
    plan_.algorithm = "test";
    plan_.num_ranks = ranks;
    plan_.input_chunks = chunks;
    plan_.output_chunks = chunks;
    plan_.execution = exec;
    plan_.scheduler = "hand";
    plan_.allocator = "hand";
    for (int r = 0; r < ranks; ++r) plan_.ranks.push_back(RankPlan{r, {}});
  }
  /// Appends a slot to thread block `tb` of `rank` (creating blocks as needed); returns its index.
  int add(int rank, int tb, Primitive p, int send_peer, int recv_peer, int channel = 0,
          std::vector<SlotDep> deps = {}, int instance = 0, int instances = 1, int count = 1) {
    auto& tbs = plan_.ranks[static_cast<size_t>(rank)].tbs;
    while (static_cast<int>(tbs.size()) <= tb) tbs.emplace_back();
    Slot s;
    s.primitive = p;
    s.send_peer = send_peer;
    s.recv_peer = recv_peer;
    s.channel = channel;
    s.deps = std::move(deps);
    s.instance = instance;
    s.instances = instances;
    s.count = count;
    tbs[static_cast<size_t>(tb)].slots.push_back(s);
    return static_cast<int>(tbs[static_cast<size_t>(tb)].slots.size()) - 1;
  }
  /// A send on `src` (block `stb`) matched by a receive on `dst` (block `dtb`).
  void transfer(int src, int stb, int dst, int dtb, int channel = 0, Primitive recv = Primitive::Recv) {
    add(src, stb, Primitive::Send, dst, -1, channel);
    add(dst, dtb, recv, -1, src, channel);
  }
  Plan& plan() { return plan_; }

 private:
  Plan plan_;
};

}  // namespace weft::sim::testing
