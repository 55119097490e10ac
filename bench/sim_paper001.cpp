// Reproduces paper 001's (ResCCL) evaluation in kind on the simulator, printing the
// markdown tables of docs/results-paper001.md:
//   1. HPDS against round-robin (Fig. 10(b)),
//   2. task-level (hpds) against algorithm-level (algo) and stage-level (stage) execution,
//   3. thread blocks and idle time against the MSCCL-style baseline (Table 3),
//   4. global link utilization (Table 1).
// Usage: sim_paper001 [section...]   sections: hpds-rr, exec, tb, util (default: all)
// Options: --cost name=value,... overrides the presets' figures; --instances N fixes the
// thread blocks per link (default: the compiler derives them from the topology);
// --fifo-depth N sets the staging slots per connection (default 4, the runtime's).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "ir/topology_io.hpp"
#include "sim/cost_model.hpp"
#include "sim/sweep.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

using namespace weft;

namespace {

const std::vector<std::string> kTopologies = {"a100-2x4", "a100-2x8", "a100-4x4", "a100-4x8"};
const std::vector<std::string> kAlgorithms = {"hm_allgather", "hm_allreduce", "ring_allreduce"};
std::map<std::string, std::string> g_cost;
int32_t g_instances = 0;
int32_t g_fifo_depth = 4;

Topology topology(const std::string& name) {
  Topology t = load_topology(name);
  sim::apply_cost_overrides(t, g_cost);
  return t;
}

/// Simulates `algo` on `topo` with one scheduler / allocator at the given sizes.
std::vector<sim::SimReport> run(const std::string& algo, const Topology& topo, const std::string& sched, const std::string& alloc,
                                const std::vector<uint64_t>& sizes) {
  sim::SweepSpec s;
  s.algorithm = algo;
  s.topology = topo;
  s.schedulers = {sched};
  s.allocator = alloc;
  s.instances = g_instances;
  s.sizes = sizes;
  s.options.fifo_depth = g_fifo_depth;
  std::vector<sim::SimReport> out;
  sim::run_sweep(s, [&](const sim::Simulator&, const sim::SimReport& r, double) { out.push_back(r); });
  return out;
}

std::string mib(uint64_t b) { return b >= (1u << 30) ? text::format("%llu GiB", (unsigned long long)(b >> 30)) : text::format("%llu MiB", (unsigned long long)(b >> 20)); }

void hpds_vs_rr() {
  std::printf("### HPDS against round-robin (paper 001 Fig. 10(b))\n\n");
  std::printf("Algorithm bandwidth (GB/s), task-level execution, state-based allocation; speedup = hpds / rr.\n\n");
  const std::vector<uint64_t> sizes = sim::parse_size_range("8M:2G:4");
  for (const std::string& tn : kTopologies) {
    Topology t = topology(tn);
    std::printf("**%s**\n\n| algorithm |", tn.c_str());
    for (uint64_t s : sizes) std::printf(" %s |", mib(s).c_str());
    std::printf("\n| --- |");
    for (size_t i = 0; i < sizes.size(); ++i) std::printf(" --- |");
    std::printf("\n");
    for (const std::string& a : kAlgorithms) {
      auto h = run(a, t, "hpds", "state", sizes);
      auto r = run(a, t, "rr", "state", sizes);
      std::printf("| %s |", a.c_str());
      for (size_t i = 0; i < sizes.size(); ++i)
        std::printf(" %.1f / %.1f (%.2fx) |", h[i].algbw_GBps, r[i].algbw_GBps, h[i].algbw_GBps / r[i].algbw_GBps);
      std::printf("\n");
    }
    std::printf("\n");
  }
}

void execution_models() {
  std::printf("### Task-level against algorithm-level and stage-level execution\n\n");
  std::printf("Algorithm bandwidth (GB/s) of hpds (task-level), algo (algorithm-level) and stage (stage-level, MSCCL's "
              "per-stage channels), state-based allocation; the last columns are hpds / algo and hpds / stage.\n\n");
  const std::vector<uint64_t> sizes = sim::parse_size_range("32M:2G:4");
  for (const std::string& tn : kTopologies) {
    Topology t = topology(tn);
    std::printf("**%s**\n\n| algorithm | size | task | algorithm | stage | task/algorithm | task/stage |\n| --- | --- | --- | --- | --- | --- | --- |\n",
                tn.c_str());
    for (const std::string& a : kAlgorithms) {
      auto h = run(a, t, "hpds", "state", sizes);
      auto g = run(a, t, "algo", "state", sizes);
      auto s = run(a, t, "stage", "state", sizes);
      for (size_t i = 0; i < sizes.size(); ++i)
        std::printf("| %s | %s | %.1f | %.1f | %.1f | %.2fx | %.2fx |\n", a.c_str(), mib(sizes[i]).c_str(), h[i].algbw_GBps,
                    g[i].algbw_GBps, s[i].algbw_GBps, h[i].algbw_GBps / g[i].algbw_GBps, h[i].algbw_GBps / s[i].algbw_GBps);
    }
    std::printf("\n");
  }
}

void thread_blocks() {
  const uint64_t size = 1ull << 30;
  std::printf("### Thread blocks and idle time (paper 001 Table 3)\n\n");
  std::printf("At %s. MSCCL-style: stage-level execution with connection-based allocation; weft: hpds with state-based "
              "allocation. TBs: most thread blocks on one rank; comm: mean busy fraction; idle: mean and max idle fraction.\n\n",
              mib(size).c_str());
  std::printf("| topology | algorithm | MSCCL-style TBs | comm | avg idle | max idle | weft TBs | comm | avg idle | max idle |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& tn : kTopologies) {
    Topology t = topology(tn);
    for (const std::string& a : kAlgorithms) {
      auto m = run(a, t, "stage", "conn", {size})[0];
      auto w = run(a, t, "hpds", "state", {size})[0];
      std::printf("| %s | %s | %d | %.1f%% | %.1f%% | %.1f%% | %d | %.1f%% | %.1f%% | %.1f%% |\n", tn.c_str(), a.c_str(), m.tbs_per_rank_max,
                  100 * m.tb_busy_mean, 100 * m.tb_idle_mean, 100 * m.tb_idle_max, w.tbs_per_rank_max, 100 * w.tb_busy_mean,
                  100 * w.tb_idle_mean, 100 * w.tb_idle_max);
    }
  }
  std::printf("\n");
}

void utilization() {
  const uint64_t size = 1ull << 30;
  std::printf("### Global link utilization (paper 001 Table 1)\n\n");
  std::printf("At %s: mean busy fraction of the links each plan uses (bandwidth fraction in parentheses).\n\n", mib(size).c_str());
  std::printf("| topology | algorithm | algorithm-level | stage-level | weft (hpds) |\n| --- | --- | --- | --- | --- |\n");
  for (const std::string& tn : kTopologies) {
    Topology t = topology(tn);
    for (const std::string& a : kAlgorithms) {
      auto g = run(a, t, "algo", "state", {size})[0];
      auto s = run(a, t, "stage", "conn", {size})[0];
      auto w = run(a, t, "hpds", "state", {size})[0];
      std::printf("| %s | %s | %.1f%% (%.1f%%) | %.1f%% (%.1f%%) | %.1f%% (%.1f%%) |\n", tn.c_str(), a.c_str(), 100 * g.link_utilization,
                  100 * g.link_bandwidth_utilization, 100 * s.link_utilization, 100 * s.link_bandwidth_utilization,
                  100 * w.link_utilization, 100 * w.link_bandwidth_utilization);
    }
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sections;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--cost" && i + 1 < argc) {
        for (auto& [k, v] : text::parse_kv_list(argv[++i])) g_cost[k] = v;
      } else if (a == "--instances" && i + 1 < argc) {
        g_instances = std::atoi(argv[++i]);
      } else if (a == "--fifo-depth" && i + 1 < argc) {
        g_fifo_depth = std::atoi(argv[++i]);
      } else {
        sections.push_back(a);
      }
    }
    if (sections.empty()) sections = {"hpds-rr", "exec", "tb", "util"};
    std::printf("Configuration: %s thread blocks per link, FIFO depth %d, micro-batch 1 MiB, presets' cost figures%s.\n\n",
                g_instances > 0 ? std::to_string(g_instances).c_str() : "compiler-derived", g_fifo_depth,
                g_cost.empty() ? "" : " with --cost overrides");
    for (const std::string& s : sections) {
      if (s == "hpds-rr") hpds_vs_rr();
      else if (s == "exec") execution_models();
      else if (s == "tb") thread_blocks();
      else if (s == "util") utilization();
      else fail(ErrorCode::InvalidArgument, "unknown section '" + s + "' (hpds-rr, exec, tb, util)");
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "sim_paper001: %s\n", e.what());
    return 2;
  }
  return 0;
}
