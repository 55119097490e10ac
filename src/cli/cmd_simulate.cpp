// `weft simulate`: build the plan of a source for a topology (plan/builder.hpp: an algorithm
// compiled, or a plan file as it is) and run it on the simulator, at one size or over a
// range, for one or several schedulers. docs/simulator.md describes it.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "ir/topology_io.hpp"
#include "lang/msccl_import.hpp"
#include "sim/cost_model.hpp"
#include "sim/svg_plot.hpp"
#include "sim/sweep.hpp"
#include "sim/trace.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::cli {

namespace {

struct SimulateArgs {
  std::string algorithm;
  std::string topology;
  std::vector<std::string> params;
  std::vector<std::string> cost;
  std::string schedulers = "hpds";
  std::string allocator = "state";
  int32_t instances = 0;
  int32_t max_tbs = 0;
  bool out_of_place = false;
  double pace = 0;
  std::string size;
  std::string sizes;
  std::string microbatch = "1M";
  int32_t fifo_depth = 4;
  std::string trace;
  std::string plot;
  bool json = false;
  bool tune = false, no_tune = false;
  double tolerance = 0;
  double max_idle = 1;
  double idle_cost = 0.02;
  std::string memory_budget;
};

void run(const SimulateArgs& a) {
  sim::SweepSpec spec;
  spec.algorithm = a.algorithm;
  for (const std::string& p : a.params)
    for (auto& [k, v] : text::parse_kv_list(p)) spec.params[k] = v;
  spec.topology = load_topology(a.topology);
  std::map<std::string, std::string> cost;
  parse_option("--cost", [&] {
    for (const std::string& c : a.cost)
      for (auto& [k, v] : text::parse_kv_list(c)) cost[k] = v;
    sim::apply_cost_overrides(spec.topology, cost);
  });
  spec.schedulers.clear();
  for (const std::string& s : text::split(a.schedulers, ','))
    if (!text::trim(s).empty()) spec.schedulers.emplace_back(text::trim(s));
  if (spec.schedulers.empty()) fail(ErrorCode::InvalidArgument, "--scheduler names no scheduler");
  spec.allocator = a.allocator;
  spec.instances = a.instances;
  spec.max_tbs = a.max_tbs;
  spec.in_place = !a.out_of_place;
  spec.pace = a.pace;
  // Tuned by default where the source is an MSCCL file, whose own schedule is the yardstick
  // (within its thread blocks); elsewhere on asking.
  if (a.tune && a.no_tune) fail(ErrorCode::InvalidArgument, "give at most one of --tune and --no-tune");
  spec.tune = a.tune || (!a.no_tune && is_msccl_xml_path(a.algorithm));
  spec.tolerance = a.tolerance;
  spec.max_idle = a.max_idle;
  spec.idle_cost = a.idle_cost;
  if (a.size.empty() == a.sizes.empty()) fail(ErrorCode::InvalidArgument, "give exactly one of --size BYTES and --sizes FROM:TO");
  spec.sizes = a.size.empty() ? parse_option("--sizes", [&] { return sim::parse_size_range(a.sizes); })
                              : std::vector<uint64_t>{parse_option("--size", [&] { return text::parse_bytes(a.size); })};
  if (a.microbatch == "runtime") spec.options.runtime_microbatch = true;
  else spec.options.microbatch_bytes = parse_option("--microbatch", [&] { return text::parse_bytes(a.microbatch); });
  spec.options.fifo_depth = a.fifo_depth;
  spec.max_memory_bytes = memory_budget_bytes(a.memory_budget);
  if (!a.trace.empty()) {
    if (spec.sizes.size() != 1 || spec.schedulers.size() != 1)
      fail(ErrorCode::InvalidArgument, "--trace records one run: give one --size and one --scheduler");
    spec.options.trace = true;
  }

  std::vector<sim::PlotSeries> series;
  std::string current;
  std::unique_ptr<text::Table> table;
  auto flush_table = [&] {
    if (table) std::fputs(table->str().c_str(), stdout);
    table.reset();
  };
  sim::run_sweep(spec, [&](const sim::Simulator& simulator, const sim::SimReport& r, double compile_s) {
    if (!r.variant.empty() && !a.json)
      std::printf("# %s at %s, tuned: %s\n", r.scheduler.c_str(), text::format_bytes(r.bytes).c_str(), r.variant_reason.c_str());
    if (r.scheduler != current || series.empty()) {
      current = r.scheduler;
      series.push_back({r.scheduler, {}});
      if (!a.json) {
        flush_table();
        std::printf("# %s (%s) on %s, %d ranks: scheduler %s, allocator %s, %s-level execution, %d thread blocks per rank "
                    "at most, compiled in %.2f s; micro-batch %s, FIFO depth %d; simulated\n",
                    r.algorithm.c_str(), std::string(to_string(r.collective)).c_str(), r.topology.c_str(), r.ranks, r.scheduler.c_str(),
                    r.allocator.c_str(), r.execution.c_str(), r.tbs_per_rank_max, compile_s, (spec.options.runtime_microbatch
                         ? "as the runtime's, " + text::format_bytes(simulator.runtime_microbatch_bytes(spec.options.staging_slot_bytes))
                         : text::format_bytes(spec.options.microbatch_bytes))
                        .c_str(),
                    r.fifo_depth);
        table = std::make_unique<text::Table>(sim::report_table_header());
      }
    }
    series.back().points.emplace_back(r.bytes, r.busbw_GBps);
    if (a.json) {
      std::printf("%s\n", sim::report_to_json(r).c_str());
      std::fflush(stdout);
    } else {
      table->add_row(sim::report_table_row(r));
    }
    if (!a.trace.empty()) {
      sim::write_chrome_trace_file(a.trace, simulator, r);
      if (r.trace_truncated)
        std::fprintf(stderr, "weft simulate: the trace keeps the first %zu spans only\n", spec.options.trace_limit);
    }
  });
  flush_table();
  if (!a.plot.empty())
    sim::write_busbw_plot(a.plot, series,
                          text::format("%s on %s (simulated)", a.algorithm.c_str(), spec.topology.name.c_str()));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto a = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand("simulate",
                                 "Compile an algorithm (or take a plan file) for a topology and run the plan on the simulator: time, algbw and "
                                 "busbw, link utilization, thread-block idle time, Chrome trace, SVG plot");
  cmd->add_option("algorithm", a->algorithm,
                  "ResCCLang file (.rccl), MSCCL XML file (.xml), name of a built-in algorithm, dsl:NAME (a chunk-DSL "
                  "built-in), a Python program (.py, docs/python.md), or a plan file (.json, from weft compile -o)")
      ->required();
  cmd->add_option("--topology,-t", a->topology, "Topology preset (h200-1x8, a100-4x8, ...) or JSON file")->required();
  cmd->add_option("--param,-p", a->params,
                  "Override header parameters, as name=value,...; nRanks, GPUPerNode and NICPerNode default to the "
                  "topology's; may repeat");
  cmd->add_option("--scheduler,-s", a->schedulers,
                  "hpds, algo, stage, rr or gc3, or as-given (an .xml file's own schedule); a comma list compares several "
                  "(default hpds)");
  cmd->add_option("--alloc", a->allocator, "Thread-block allocation: state (default), conn, peer, peer-mixed or rank (docs/compile.md)");
  cmd->add_option("--instances", a->instances, "Thread blocks per link (default: derived from the topology)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--max-tbs", a->max_tbs,
                  "Most thread blocks one rank may run; a plan that needs more is compiled again with fewer instances "
                  "(default 0: no limit)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--out-of-place", a->out_of_place, "Compile for distinct input and output buffers (default: in place)");
  cmd->add_option("--pace", a->pace,
                  "Task level across nodes: NVLink work whose data come through the network on only the blocks that keep "
                  "pace with it, each taking up to this multiple of what it moves in the call's bound time (docs/compile.md, "
                  "\"Paced instances\"; default 0: off; untuned runs, the tuner tries it itself)")
      ->check(CLI::Range(0.0, 64.0));
  cmd->add_option("--size", a->size, "Message size in bytes (nccl-tests convention), e.g. 256M");
  cmd->add_option("--sizes", a->sizes, "Size range FROM:TO[:FACTOR], doubling by default, e.g. 1M:4G");
  cmd->add_option("--microbatch", a->microbatch, "Micro-batch size per chunk slot (default 1M, the paper's), or 'runtime': as the GPU runtime sizes it "
                  "(one 512 KiB staging slot per thread block and message)");
  cmd->add_option("--fifo-depth", a->fifo_depth, "Staging slots per connection (default 4, the runtime's)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--cost", a->cost,
                  "Override cost figures of the topology, as name=value,... (docs/cost-model.md lists them); may repeat");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (chrome://tracing, Perfetto) of the run to this file");
  cmd->add_option("--plot", a->plot, "Write an SVG plot of busbw against size, one line per scheduler, to this file");
  cmd->add_flag("--json", a->json, "Print one JSON object per size instead of a table");
  cmd->add_option("--tolerance", a->tolerance,
                  "When tuning: variants this much slower than the fastest (a fraction, e.g. 0.05) count as fast, and the one "
                  "with the fewest thread blocks per rank is taken (default 0: the fastest)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--max-idle", a->max_idle,
                  "When tuning: only variants whose thread blocks idle at most this fraction of their lifetime on average "
                  "(paper 001 Table 3's Avg Idle) compete, when any does (default 1: no bound)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--idle-cost", a->idle_cost,
                  "When tuning across nodes without --tolerance and --max-idle: if the fastest variant's thread blocks idle "
                  "more than 15% of their lifetime, take the fastest variant at most this fraction slower whose blocks idle "
                  "at most 15%, when one does (default 0.02; 0: off)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_flag("--tune", a->tune,
                "Tune a compiler scheduler without --instances for each size by the simulator (docs/compile.md, \"Automatic "
                "instances\"), within --max-tbs, else an .xml file's own thread blocks, else the scheduler's own plan's; the "
                "default for .xml files");
  cmd->add_flag("--no-tune", a->no_tune, "Take the compiler's derived instances as they are, .xml files included");
  add_memory_budget_option(cmd, a->memory_budget);
  cmd->callback([a] {
    try {
      run(*a);
    } catch (const Error& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "weft simulate: %s\n", e.what());
      set_exit(e.code() == ErrorCode::Internal ? 3 : 2);
    }
  });
}

}  // namespace weft::cli
