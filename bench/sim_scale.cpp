// Simulator scale benchmark: a built-in algorithm compiled for an a100-NxG cluster and
// simulated with a given number of micro-batches per chunk slot. Prints the time of each
// phase (wall and CPU: the build machines are shared) and the simulated figures.
//   sim_scale [topology=a100-128x8] [microbatches=64] [algorithm=hm_allreduce] [--no-merge]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "compile/compiler.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "sim/program.hpp"
#include "sim/simulator.hpp"
#include "sim/sweep.hpp"
#include "util/error.hpp"

using namespace weft;

namespace {

struct Clock {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();
  /// Wall and CPU seconds since the last call.
  std::pair<double, double> lap() {
    auto w = std::chrono::steady_clock::now();
    std::clock_t c = std::clock();
    std::pair<double, double> d{std::chrono::duration<double>(w - wall).count(), static_cast<double>(c - cpu) / CLOCKS_PER_SEC};
    wall = w;
    cpu = c;
    return d;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string topo_name = "a100-128x8", algo_name = "hm_allreduce";
  int mbs = 64;
  bool merge = true;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-merge") merge = false;
    else if (positional == 0 && ++positional) topo_name = a;
    else if (positional == 1 && ++positional) mbs = std::atoi(a.c_str());
    else if (positional == 2 && ++positional) algo_name = a;
  }
  try {
    Clock clock;
    Topology topo = load_topology(topo_name);
    Algorithm algo = load_algorithm(algo_name, sim::params_for_topology(topo, {}));
    auto load = clock.lap();
    CompileResult cr = compile(algo, topo, {});
    auto comp = clock.lap();
    sim::Simulator sim(cr.plan, topo, merge);
    auto build = clock.lap();
    sim::SimOptions o;
    const uint64_t chunks = static_cast<uint64_t>(std::max(cr.plan.input_chunks, cr.plan.output_chunks));
    o.bytes = chunks * static_cast<uint64_t>(mbs) * o.microbatch_bytes;
    sim::SimReport r = sim.run(o);
    auto run = clock.lap();
    std::printf("# %s on %s: %zu transfers, %lld plan slots, %d thread blocks per rank, %d micro-batches per slot\n",
                algo_name.c_str(), topo_name.c_str(), algo.transfers.size(), static_cast<long long>(cr.slots), r.tbs_per_rank_max,
                r.microbatches);
    std::printf("# simulated %zu blocks and %zu slots (%s), %lld invocations stepped for %lld in the plan, %lld events\n",
                sim.program().tbs.size(), sim.program().slots.size(), merge ? "instance siblings merged" : "not merged",
                static_cast<long long>(r.simulated_invocations), static_cast<long long>(r.invocations), static_cast<long long>(r.events));
    std::printf("phase             wall(s)   cpu(s)\n");
    std::printf("load             %8.2f %8.2f\n", load.first, load.second);
    std::printf("compile          %8.2f %8.2f\n", comp.first, comp.second);
    std::printf("simulator build  %8.2f %8.2f\n", build.first, build.second);
    std::printf("simulation       %8.2f %8.2f\n", run.first, run.second);
    std::printf("# result: %.1f us, algbw %.2f GB/s, busbw %.2f GB/s, link utilization %.1f%%, idle mean %.1f%% max %.1f%%\n",
                r.time_us, r.algbw_GBps, r.busbw_GBps, 100 * r.link_utilization, 100 * r.tb_idle_mean, 100 * r.tb_idle_max);
  } catch (const Error& e) {
    std::fprintf(stderr, "sim_scale: %s\n", e.what());
    return 2;
  }
  return 0;
}
