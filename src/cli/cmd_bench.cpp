// `weft bench [COLLECTIVE...] [--sizes FROM:TO] [--graph] [--csv F] [--json]`: on GPUs,
// weft against NCCL in one run (bench_gpu.cpp); without a GPU, the simulated sweep
// (sim::run_simulated_bench, docs/simulator.md), whose first line says it is simulated.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/bench_predict.hpp"
#include "cli/commands.hpp"
#include "ir/topology_io.hpp"
#include "plan/builder.hpp"
#include "exec/host_reduce.hpp"
#include "sim/sweep.hpp"
#include "weft/weft.h"
#include "util/error.hpp"
#include "util/text.hpp"
#if WEFT_HAVE_CUDA
#include "cli/bench_gpu.hpp"
#endif

namespace weft::cli {

namespace {

/// The names `--type` and `--op` take (weft.h's types and reductions), for CLI::IsMember.
std::vector<std::string> dtype_names() {
  std::vector<std::string> v;
  for (int t = 0; t < weftNumTypes; ++t) v.emplace_back(host::dtype_name(t));
  return v;
}
int dtype_index(const std::string& name) {
  for (int t = 0; t < weftNumTypes; ++t)
    if (name == host::dtype_name(t)) return t;
  return weftFloat32;  // unreachable: --type is checked against dtype_names()
}
std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (int o = 0; o < weftNumOps; ++o) v.emplace_back(host::op_name(o));
  return v;
}

struct BenchArgs {
  std::vector<std::string> collectives;
  std::string sizes = "8:256M";
  bool graph = false, json = false, no_nccl = false, no_check = false;
  std::string csv, dtype = "float32", op = "sum";
  int ranks = 0, warmup = 5, iters = 20;
  double factor = 2;
  std::string topology = "h200-1x2";
  std::vector<std::string> algorithms;
  std::string scheduler = "hpds";
  std::string memory_budget;
  std::string trace, trace_size;
  uint32_t trace_records = 4096;
  bool no_sim = false, predict = false;
};

/// The scheduler checked as weft simulate checks it, and the rows' sizes, on GPUs and
/// simulated alike: FROM, then the last times --factor (rounded up, at least one more byte),
/// up to TO; more than kMaxRows is refused.
std::vector<uint64_t> checked_rows(const BenchArgs& a, uint64_t from, uint64_t to) {
  BuildOptions scheduler_check;
  scheduler_check.compile.scheduler = a.scheduler;
  check_build_options(scheduler_check);
  constexpr size_t kMaxRows = 64;
  std::vector<uint64_t> sizes;
  for (double s = static_cast<double>(from); s <= static_cast<double>(to); s = std::max(s + 1, std::ceil(s * a.factor))) {
    if (sizes.size() == kMaxRows)
      fail(ErrorCode::InvalidArgument,
           text::format("--sizes %s with --factor %.10g makes more than %zu rows, the most weft bench runs; raise "
                        "--factor or narrow --sizes",
                        a.sizes.c_str(), a.factor, kMaxRows));
    sizes.push_back(static_cast<uint64_t>(s));
  }
  return sizes;
}

/// The simulated topology: --topology; with --ranks N (N > 0), h200-1xN when no topology is
/// given, and a given topology must have N GPUs.
std::string simulated_topology(const BenchArgs& a, bool topology_given) {
  if (a.ranks <= 0) return a.topology;
  if (topology_given) {
    const int gpus = load_topology(a.topology).num_gpus();
    if (gpus != a.ranks)
      fail(ErrorCode::InvalidArgument, "--ranks " + std::to_string(a.ranks) + " but topology " + a.topology + " has " +
                                           std::to_string(gpus) + " GPUs (without a GPU the run simulates the "
                                           "topology's GPUs)");
    return a.topology;
  }
  const std::string name = "h200-1x" + std::to_string(a.ranks);
  try {
    load_topology(name);
  } catch (const Error& e) {
    fail(e.code(), "--ranks " + std::to_string(a.ranks) + " without a GPU simulates topology " + name + ": " + e.what() +
                       " (or give --topology)");
  }
  return name;
}

/// The sweep on the simulator (no GPU in use).
void run_simulated(const BenchArgs& a, const std::string& topology, const std::vector<std::string>& collectives,
                   const std::vector<uint64_t>& sizes, uint64_t memory_budget) {
  sim::BenchSpec spec;
  spec.topology = topology;
  spec.algorithms = a.algorithms;
  spec.scheduler = a.scheduler;
  spec.json = a.json;
  spec.max_memory_bytes = memory_budget;
  spec.dtype = a.dtype;
  spec.dtype_bytes = host::dtype_size(dtype_index(a.dtype));
  std::ofstream csv;
  if (!a.csv.empty()) {
    csv.open(a.csv);
    spec.csv = &csv;
  }
  for (const std::string& c : collectives) {
    std::optional<Collective> k = collective_from_string(c);
    if (!k) fail(ErrorCode::InvalidArgument, "unknown collective '" + c + "'");
    spec.collectives.push_back(*k);
  }
  spec.sizes = sizes;
  const int done = sim::run_simulated_bench(spec, std::cout);
  if (csv.is_open()) {
    csv.close();
    if (!csv) fail(ErrorCode::System, "writing the --csv file '" + a.csv + "' failed");
  }
  if (done == 0) {
    std::cout.flush();
    std::fprintf(stderr, "weft bench: no algorithm of those collectives could run on %s\n", topology.c_str());
    set_exit(1);
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench",
                                 "Benchmark collectives on this machine's GPUs against NCCL (nccl-tests' table); without a "
                                 "GPU, the same sweep on the simulator, and the output's first line says so");
  auto args = std::make_shared<BenchArgs>();
  cmd->add_option("collectives", args->collectives, "AllReduce AllGather ReduceScatter Broadcast Reduce AllToAll (default: the first three)");
  cmd->add_option("--sizes", args->sizes, "FROM:TO in bytes, with K/M/G suffixes (default 8:256M)");
  cmd->add_option("--factor", args->factor, "size multiplier between rows, more than 1 and at most 1024 (default 2)");
  cmd->add_flag("--graph", args->graph, "time replays of a CUDA graph of the calls");
  cmd->add_option("--csv", args->csv, "also write the rows to this CSV file");
  cmd->add_flag("--json", args->json, "print one JSON object per row instead of the table");
  cmd->add_option("--ranks", args->ranks, "GPUs to use, one process each, 1 to 4096 (default 0: all)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--warmup", args->warmup, "untimed calls per size, 0 to 1000000 (default 5)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--iters", args->iters, "timed calls per size, 1 to 1000000 (default 20)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--type", args->dtype, "element type (default float32)")->check(CLI::IsMember(dtype_names()));
  cmd->add_option("--op", args->op, "reduction (default sum)")->check(CLI::IsMember(op_names()));
  cmd->add_flag("--no-nccl", args->no_nccl, "do not load NCCL");
  cmd->add_flag("--no-check", args->no_check, "skip the #wrong check");
  cmd->add_option("--topology,-t", args->topology, "without a GPU: the simulated topology (default h200-1x2)");
  cmd->add_option("--algo,-a", args->algorithms,
                  "without a GPU: algorithms to simulate (files or built-in names; default: the built-ins of the collectives)");
  cmd->add_option("--scheduler,-s", args->scheduler, "without a GPU: the scheduler of the simulated plans (default hpds)");
  cmd->add_option("--trace", args->trace,
                  "on GPUs: one extra traced call per size; its Chrome trace (measured busy/idle per thread block) to "
                  "this file (several sizes: the size before the extension), an SVG of measured and simulated busbw beside it");
  cmd->add_option("--trace-size", args->trace_size, "trace only the rows of this size (bytes, K/M/G suffixes)");
  cmd->add_option("--trace-records", args->trace_records, "records per thread block a trace keeps, 1 to 1000000 (default 4096)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--no-sim", args->no_sim, "on GPUs: leave out the simulator's prediction column");
  cmd->add_flag("--predict", args->predict,
                "run nothing: print the simulator's per-call time of what the runtime would run (its selection and "
                "plans) for --ranks ranks (default: the topology's GPUs) on --topology");
  add_memory_budget_option(cmd, args->memory_budget);
  cmd->callback([args, cmd] {
    try {
      auto colon = args->sizes.find(':');
      const uint64_t from = parse_option("--sizes", [&] {
        return text::parse_bytes(colon == std::string::npos ? args->sizes : args->sizes.substr(0, colon));
      });
      const uint64_t to = colon == std::string::npos
                              ? from
                              : parse_option("--sizes", [&] { return text::parse_bytes(args->sizes.substr(colon + 1)); });
      if (from == 0 || to < from) fail(ErrorCode::InvalidArgument, "--sizes wants FROM:TO with 0 < FROM <= TO");
      if (!(args->factor > 1 && args->factor <= 1024))  // also refuses nan
        fail(ErrorCode::InvalidArgument, text::format("--factor %g must be more than 1 and at most 1024", args->factor));
      const uint64_t memory_budget = memory_budget_bytes(args->memory_budget);  // the simulated run's
      // The CSV file is checked before any work: a run whose rows cannot be kept is refused.
      if (!args->csv.empty() && !std::ofstream(args->csv))
        fail(ErrorCode::System, "cannot write the --csv file '" + args->csv + "': " + std::strerror(errno));
      std::vector<std::string> collectives =
          args->collectives.empty() ? std::vector<std::string>{"AllReduce", "AllGather", "ReduceScatter"} : args->collectives;
      const std::vector<uint64_t> sizes = checked_rows(*args, from, to);
      if (args->predict) {
        std::vector<Collective> cs;
        for (const std::string& c : collectives) {
          std::optional<Collective> k = collective_from_string(c);
          if (!k || *k == Collective::Custom) fail(ErrorCode::InvalidArgument, "unknown collective '" + c + "'");
          cs.push_back(*k);
        }
        // --topology given: its GPUs unless --ranks says otherwise; else h200-1x<ranks>.
        const bool topo_given = cmd->count("--topology") > 0;
        const int ranks = args->ranks > 0 ? args->ranks : load_topology(args->topology).num_gpus();
        std::ofstream csv;
        if (!args->csv.empty()) csv.open(args->csv);
        run_predicted_bench(cs, sizes, ranks, args->graph, topo_given ? args->topology : "", args->dtype,
                            host::dtype_size(dtype_index(args->dtype)), args->json, csv.is_open() ? &csv : nullptr);
        if (csv.is_open()) {
          csv.close();
          if (!csv) fail(ErrorCode::System, "writing the --csv file '" + args->csv + "' failed");
        }
        return;
      }
#if WEFT_HAVE_CUDA
      BenchOptions o;
      o.collectives = collectives;
      o.from = from;
      o.to = to;
      o.factor = args->factor;
      o.sizes = sizes;
      o.graph = args->graph;
      o.csv = args->csv;
      o.json = args->json;
      o.ranks = args->ranks;
      o.warmup = args->warmup;
      o.iters = args->iters;
      o.nccl = !args->no_nccl;
      o.check = !args->no_check;
      o.dtype = args->dtype;
      o.op = args->op;
      o.trace = args->trace;
      if (!args->trace_size.empty())
        o.trace_size = parse_option("--trace-size", [&] { return text::parse_bytes(args->trace_size); });
      o.trace_records = args->trace_records;
      o.predict = !args->no_sim;
      if (cmd->count("--topology") > 0) o.sim_topology = args->topology;
      int rc = bench_gpu(o);
      if (rc != 77) {
        set_exit(rc);
        return;
      }
#endif
      // No GPU in use: the same sweep on the simulator.
      if (!args->trace.empty())
        fail(ErrorCode::InvalidArgument, "--trace measures a GPU's run and no GPU is in use (weft simulate --trace "
                                         "writes a simulated trace)");
      run_simulated(*args, simulated_topology(*args, cmd->count("--topology") > 0), collectives, sizes, memory_budget);
    } catch (const Error& e) {
      std::cout.flush();
      std::fprintf(stderr, "weft bench: %s\n", e.what());
      set_exit(2);
    }
  });
}

}  // namespace weft::cli
