// Simulator scale benchmark: HM AllReduce (naively lowered, see sim_synthetic.hpp) on
// a100-style NxG topologies, 64 micro-batches per slot. Prints one table row per size.
//   sim_scale [nodes] [gpus_per_node] [microbatches]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>

#include "sim/simulator.hpp"
#include "sim_synthetic.hpp"
#include "util/text.hpp"

using namespace weft;

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 128;
  const int gpus = argc > 2 ? std::atoi(argv[2]) : 8;
  const int mbs = argc > 3 ? std::atoi(argv[3]) : 64;
  Topology t;
  t.name = text::format("synthetic-a100-%dx%d", nodes, gpus);
  t.nodes = nodes;
  t.gpus_per_node = gpus;
  t.nics_per_node = gpus / 2;
  for (int g = 0; g < gpus; ++g) t.nic_of_gpu.push_back(g / 2);
  t.nodes_per_rack = 1;
  t.nvlink_bandwidth_GBps = 300;
  t.nvlink_latency_us = 2;
  t.nic_bandwidth_GBps = 25;
  t.nic_latency_us = 5;
  t.aggregation_latency_us = 1;
  t.tb_copy_GBps = 20;
  t.tb_net_GBps = 6.25;
  t.hbm_bandwidth_GBps = 2039;
  t.primitive_overhead_us = 1;
  t.contention_gamma = 0.15;
  auto t0 = std::chrono::steady_clock::now();
  auto ts = bench::hm_allreduce(nodes, gpus);
  Plan plan = bench::lower_naive(ts, nodes * gpus, nodes * gpus, Collective::AllReduce);
  double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  sim::Simulator s(plan, t);
  double prep = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sim::SimOptions o;
  o.bytes = static_cast<uint64_t>(mbs) * (1u << 20) * static_cast<uint64_t>(nodes * gpus);
  const std::clock_t c0 = std::clock();
  sim::SimReport r = s.run(o);
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  std::printf("# %s: %zu transfers, plan built in %.2f s, program in %.2f s\n", t.name.c_str(), ts.size(), build, prep);
  std::printf("# %lld invocations, %lld events, simulated in %.2f s wall, %.2f s CPU (%.0f ns CPU per invocation)\n",
              static_cast<long long>(r.invocations), static_cast<long long>(r.events), r.wall_seconds, cpu,
              1e9 * cpu / static_cast<double>(r.invocations));
  std::printf("time %.1f us  busbw %.2f GB/s  link util %.1f%%  idle mean %.1f%% max %.1f%%  TBs/rank %d\n", r.time_us, r.busbw_GBps,
              100 * r.link_utilization, 100 * r.tb_idle_mean, 100 * r.tb_idle_max, r.tbs_per_rank_max);
  return 0;
}
