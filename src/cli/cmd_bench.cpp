// `weft bench [COLLECTIVE...] [--sizes FROM:TO] [--graph] [--csv F] [--json]`: on GPUs,
// weft against NCCL in one run (bench_gpu.cpp); without a GPU, the simulated sweep
// (sim::run_simulated_bench, docs/simulator.md), whose first line says it is simulated.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "sim/sweep.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#if WEFT_HAVE_CUDA
#include "cli/bench_gpu.hpp"
#endif

namespace weft::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench",
                                 "Benchmark collectives on this machine's GPUs against NCCL (nccl-tests' table); without a "
                                 "GPU, the same sweep on the simulator, and the output's first line says so");
  struct Args {
    std::vector<std::string> collectives;
    std::string sizes = "8:256M";
    bool graph = false, json = false, no_nccl = false, no_check = false;
    std::string csv, dtype = "float32", op = "sum";
    int ranks = 0, warmup = 5, iters = 20;
    double factor = 2;
    std::string topology = "h200-1x2";
    std::vector<std::string> algorithms;
    std::string scheduler = "hpds";
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("collectives", args->collectives, "AllReduce AllGather ReduceScatter Broadcast Reduce AllToAll (default: the first three)");
  cmd->add_option("--sizes", args->sizes, "FROM:TO in bytes, with K/M/G suffixes (default 8:256M)");
  cmd->add_option("--factor", args->factor, "size multiplier between rows (default 2)");
  cmd->add_flag("--graph", args->graph, "time replays of a CUDA graph of the calls");
  cmd->add_option("--csv", args->csv, "also write the rows to this CSV file");
  cmd->add_flag("--json", args->json, "print one JSON object per row instead of the table");
  cmd->add_option("--ranks", args->ranks, "GPUs to use, one process each (default: all)");
  cmd->add_option("--warmup", args->warmup, "untimed calls per size (default 5)");
  cmd->add_option("--iters", args->iters, "timed calls per size (default 20)");
  cmd->add_option("--type", args->dtype, "element type (default float32)");
  cmd->add_option("--op", args->op, "reduction (default sum)");
  cmd->add_flag("--no-nccl", args->no_nccl, "do not load NCCL");
  cmd->add_flag("--no-check", args->no_check, "skip the #wrong check");
  cmd->add_option("--topology,-t", args->topology, "without a GPU: the simulated topology (default h200-1x2)");
  cmd->add_option("--algo,-a", args->algorithms,
                  "without a GPU: algorithms to simulate (files or built-in names; default: the built-ins of the collectives)");
  cmd->add_option("--scheduler,-s", args->scheduler, "without a GPU: the scheduler of the simulated plans (default hpds)");
  cmd->callback([args] {
    try {
      auto colon = args->sizes.find(':');
      uint64_t from = text::parse_bytes(colon == std::string::npos ? args->sizes : args->sizes.substr(0, colon));
      uint64_t to = colon == std::string::npos ? from : text::parse_bytes(args->sizes.substr(colon + 1));
      if (from == 0 || to < from || args->factor <= 1)
        fail(ErrorCode::InvalidArgument, "--sizes wants FROM:TO with 0 < FROM <= TO, --factor > 1");
      std::vector<std::string> collectives =
          args->collectives.empty() ? std::vector<std::string>{"AllReduce", "AllGather", "ReduceScatter"} : args->collectives;
#if WEFT_HAVE_CUDA
      BenchOptions o;
      o.collectives = collectives;
      o.from = from;
      o.to = to;
      o.factor = args->factor;
      o.graph = args->graph;
      o.csv = args->csv;
      o.json = args->json;
      o.ranks = args->ranks;
      o.warmup = args->warmup;
      o.iters = std::max(1, args->iters);
      o.nccl = !args->no_nccl;
      o.check = !args->no_check;
      o.dtype = args->dtype;
      o.op = args->op;
      int rc = bench_gpu(o);
      if (rc != 77) {
        set_exit(rc);
        return;
      }
#endif
      // No GPU in use: the same sweep on the simulator.
      sim::BenchSpec spec;
      spec.topology = args->topology;
      spec.algorithms = args->algorithms;
      spec.scheduler = args->scheduler;
      spec.json = args->json;
      for (const std::string& c : collectives) {
        std::optional<Collective> k = collective_from_string(c);
        if (!k) fail(ErrorCode::InvalidArgument, "unknown collective '" + c + "'");
        spec.collectives.push_back(*k);
      }
      for (double s = static_cast<double>(from); s <= static_cast<double>(to) && spec.sizes.size() < 64;
           s = std::max(s + 1, std::ceil(s * args->factor)))
        spec.sizes.push_back(static_cast<uint64_t>(s));
      if (sim::run_simulated_bench(spec, std::cout) == 0) {
        std::cout.flush();
        std::fprintf(stderr, "weft bench: no algorithm of those collectives could run on %s\n", args->topology.c_str());
        set_exit(1);
      }
    } catch (const Error& e) {
      std::cout.flush();
      std::fprintf(stderr, "weft bench: %s\n", e.what());
      set_exit(2);
    }
  });
}

}  // namespace weft::cli
