// `weft compile`: algorithm + topology -> plan (docs/compile.md).
//
//   weft compile ALGO --topology T [--param k=v,...] [--scheduler S] [--alloc A]
//   weft compile FILE.xml --topology T --scheduler as-given [-o plan.json] [--json]
//                [--instances N] [--max-tbs N] [--out-of-place] [--no-fuse] [--no-aggregate]
//                [--protocol P] [--no-verify] [-o plan.json] [--json]
//   weft compile --check plan.json [--json]
//
// Prints tasks, sub-pipelines, thread blocks per rank (max and mean), fused primitives and each
// phase's time; --json prints the same as one JSON object. Bad input is one error line and a
// non-zero exit (main.cpp turns a weft::Error into "weft: <message>" and status 2).
#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/compile_args.hpp"
#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/msccl_import.hpp"
#include "plan/builder.hpp"
#include "plan/plan_file.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double x, int digits) { return text::format("%.*f", digits, x); }

void run_check(const CompileArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  Plan plan = load_plan(a.check);
  DeadlockReport dl = check_deadlock(plan, a.fifo_depth);
  double secs = seconds_since(t0);
  if (a.json) {
    nlohmann::json j = plan_summary_json(plan);
    j["plan"] = a.check;
    j["deadlock_free"] = dl.ok;
    j["fifo_depth"] = a.fifo_depth;
    if (!dl.ok) j["deadlock"] = dl.message;
    j["seconds"] = {{"check", secs}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s: %s for %s, %s / %s, %s execution, %d ranks, %d thread blocks per rank (max), %s (mean)\n",
                a.check.c_str(), plan.algorithm.c_str(), plan.topology.c_str(), plan.scheduler.c_str(),
                plan.allocator.c_str(), std::string(to_string(plan.execution)).c_str(), plan.num_ranks,
                plan.max_tbs_per_rank(), fixed(plan.mean_tbs_per_rank(), 1).c_str());
    if (dl.ok) std::printf("deadlock-free with FIFOs of %d messages\n", a.fifo_depth);  // otherwise the error line says why
  }
  if (!dl.ok) fail(ErrorCode::Verify, a.check + ": " + dl.message);
}

// Every source goes through the plan builder (plan/builder.hpp): a built-in, .rccl, dsl:NAME or
// .xml source is parsed for the topology, verified (unless --no-verify) and compiled; with
// --scheduler as-given, an MSCCL XML file's own thread blocks, steps and dependencies are
// the plan (algorithm-level execution, as MSCCL runs it), the baseline weft's schedules are
// measured against (docs/msccl-xml.md), and no compiler stage runs. Either plan is checked
// for deadlock with --fifo-depth (MSCCL's files rely on buffered connections).
void run_compile(const CompileArgs& a) {
  const bool as_given = a.scheduler == "as-given";
  BuildOptions bo;
  CompileOptions& o = bo.compile;
  o.scheduler = a.scheduler;
  o.allocator = a.allocator;
  o.instances = a.instances;
  o.max_tbs = a.max_tbs;
  o.in_place = !a.out_of_place;
  o.fuse = !a.no_fuse;
  o.aggregate = !a.no_aggregate;
  o.protocol = a.protocol;
  o.keep_graph = false;
  o.fifo_depth = a.fifo_depth;
  o.max_memory_bytes = memory_budget_bytes(a.memory_budget);
  if (is_plan_file_path(a.algo))
    fail(ErrorCode::InvalidArgument, a.algo + " is a plan file, compiled already: check it with weft compile --check " + a.algo);
  if (as_given && !is_msccl_xml_path(a.algo))
    fail(ErrorCode::InvalidArgument, "--scheduler as-given keeps an MSCCL XML file's own schedule; '" + a.algo +
                                         "' is not an .xml file");
  check_build_options(bo);  // refuse bad options before the (possibly long) parse
  if (a.topology.empty()) fail(ErrorCode::InvalidArgument, "weft compile needs --topology (a preset such as a100-2x4, or a file)");
  Topology topo = load_topology(a.topology);
  SourceOptions so;
  so.params = text::parse_kv_list(a.params);
  so.verify = !a.no_verify;
  so.as_given_only = as_given;
  const PlanSource src = load_source(a.algo, topo, so);
  o.in_place = compile_in_place(src, !a.out_of_place);
  BuiltPlan b = build_plan(src, topo, bo);
  const CompileResult& r = b.result;
  if (!a.output.empty()) save_plan(r.plan, a.output);

  if (a.json) {
    nlohmann::json j = plan_summary_json(r.plan);
    j["tasks"] = r.tasks;
    j["slots"] = r.slots;
    if (as_given) {
      j["deadlock_free"] = true;  // else build_plan has refused the plan
      j["fifo_depth"] = a.fifo_depth;
      j["seconds"] = {{"parse", r.seconds.parse}, {"verify", r.seconds.verify}, {"total", r.seconds.total}};
    } else {
      j["fused_primitives"] = r.fused_primitives;
      j["aggregated_tasks"] = r.aggregated_tasks;
      j["instances"] = {{"nvlink", r.instances_intra}, {"network", r.instances_inter}, {"local", r.instances_local}};
      j["seconds"] = {{"parse", r.seconds.parse},       {"verify", r.seconds.verify}, {"analyse", r.seconds.analyse},
                      {"schedule", r.seconds.schedule}, {"lower", r.seconds.lower},   {"total", r.seconds.total}};
    }
    j["plan"] = a.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.output);
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  const Plan& p = r.plan;
  auto line = [](const char* what, const std::string& value) { std::printf("  %-42s %s\n", what, value.c_str()); };
  if (as_given) {
    std::printf("%s on %s: the file's own schedule (as-given), %s, %s-level execution\n", p.algorithm.c_str(),
                p.topology.c_str(), p.in_place ? "in place" : "out of place", std::string(to_string(p.execution)).c_str());
    line("tasks", std::to_string(r.tasks));
    line("thread blocks per rank, max", std::to_string(p.max_tbs_per_rank()));
    line("thread blocks per rank, mean", fixed(p.mean_tbs_per_rank(), 2));
    line("slots, all ranks", std::to_string(r.slots));
    line("deadlock-free with FIFOs of (messages)", std::to_string(a.fifo_depth));
    line("protocol", p.protocol);
    line("seconds: parse", fixed(r.seconds.parse, 3));
    line("seconds: verify", a.no_verify ? "skipped" : fixed(r.seconds.verify, 3));
    if (!a.output.empty()) std::printf("plan written to %s\n", a.output.c_str());
    return;
  }
  std::printf("%s on %s: %s scheduler, %s allocation, %s, %s-level execution\n", p.algorithm.c_str(), p.topology.c_str(),
              p.scheduler.c_str(), p.allocator.c_str(), p.in_place ? "in place" : "out of place",
              std::string(to_string(p.execution)).c_str());
  line("tasks", std::to_string(r.tasks));
  line("sub-pipelines", std::to_string(p.num_subpipelines));
  line("thread blocks per rank, max", std::to_string(p.max_tbs_per_rank()));
  line("thread blocks per rank, mean", fixed(p.mean_tbs_per_rank(), 2));
  line("slots, all ranks", std::to_string(r.slots));
  line("fused primitives (rcs, rrcs, rrs)", std::to_string(r.fused_primitives));
  line("aggregated tasks", std::to_string(r.aggregated_tasks));
  line("instances: NVLink / network / local",
       std::to_string(r.instances_intra) + " / " + std::to_string(r.instances_inter) + " / " + std::to_string(r.instances_local));
  line("seconds: parse", fixed(r.seconds.parse, 3));
  line("seconds: verify", a.no_verify ? "skipped" : fixed(r.seconds.verify, 3));
  line("seconds: analyse", fixed(r.seconds.analyse, 3));
  line("seconds: schedule", fixed(r.seconds.schedule, 3));
  line("seconds: lower", fixed(r.seconds.lower, 3));
  line("seconds: total", fixed(r.seconds.total, 3));
  if (!a.output.empty()) std::printf("plan written to %s\n", a.output.c_str());
}

}  // namespace

void register_compile(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "Compile an algorithm for a topology into a plan (docs/compile.md)");
  cmd->add_option("algorithm", args->algo, "A .rccl or .xml file, a built-in algorithm's name, dsl:NAME (a chunk-DSL built-in), or a .py program "
                  "(docs/python.md)");
  cmd->add_option("--topology,-t", args->topology, "A topology preset (a100-2x4, h200-1x8, ...) or a JSON file");
  cmd->add_option("--param,-p", args->params,
                  "Algorithm parameters, k=v,... (e.g. nRanks=16,GPUPerNode=8); nRanks, GPUPerNode and NICPerNode default "
                  "to the topology's");
  cmd->add_option("--scheduler,--schedule,-s", args->scheduler,
                  "hpds (default), algo, stage, rr or gc3; as-given keeps an MSCCL XML file's own schedule; auto (with "
                  "--size) takes whichever of them the simulator runs fastest");
  cmd->add_option("--alloc,-a", args->allocator, "Thread-block allocation: state (default), conn, peer, peer-mixed or rank");
  cmd->add_option("--instances", args->instances, "Thread blocks per link, 1 to 64 (default 0: derived from the topology)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--max-tbs", args->max_tbs,
                  "Most thread blocks one rank may run; a plan that needs more is lowered again with fewer instances "
                  "(default 0: no limit)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--out-of-place", args->out_of_place, "Lower for distinct input and output buffers");
  cmd->add_flag("--no-fuse", args->no_fuse, "Do not fuse primitives into rcs / rrcs / rrs");
  cmd->add_flag("--no-aggregate", args->no_aggregate, "Do not merge contiguous chunks on one link and step");
  cmd->add_option("--protocol", args->protocol, "Simple (default), LL or LL128, recorded in the plan");
  cmd->add_option("--fifo-depth", args->fifo_depth,
                  "Messages a connection holds in the deadlock check (default 4, the runtime's WEFT_FIFO_DEPTH; 0: "
                  "every send waits for its receive)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--no-verify", args->no_verify, "Skip the symbolic verifier (the algorithm must be correct)");
  cmd->add_option("--output,-o", args->output, "Write the plan to this JSON file (docs/plan-format.md)");
  cmd->add_option("--check", args->check, "Load a plan file and check it (structure, deadlock) instead of compiling");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->add_option("--size", args->size,
                  "Compile for calls of this size (e.g. 64M): instances tuned by the simulator (docs/compile.md, \"Automatic "
                  "instances\"); with --scheduler auto, the schedule too");
  cmd->add_option("--microbatch", args->microbatch, "Micro-batch size the simulator runs with --size (default 1M), or 'runtime'");
  cmd->add_option("--tolerance", args->tolerance,
                  "With --size: variants this much slower than the fastest (a fraction) count as fast, the fewest thread "
                  "blocks per rank wins (default 0)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--max-idle", args->max_idle,
                  "With --size: only variants whose thread blocks idle at most this fraction of their lifetime on average "
                  "(simulated, paper 001 Table 3's Avg Idle) compete, when any does (default 1: no bound)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--idle-cost", args->idle_cost,
                  "With --size across nodes, without --tolerance and --max-idle: if the fastest variant's thread blocks idle "
                  "more than 15% of their lifetime, take the fastest variant at most this fraction slower whose blocks idle "
                  "at most 15%, when one does (default 0.02; 0: off)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_flag("--no-tune", args->no_tune, "With --size: keep derived instances (the simulator only compares schedulers)");
  add_memory_budget_option(cmd, args->memory_budget);
  cmd->callback([args] {
    if (!args->check.empty()) {
      if (!args->algo.empty()) fail(ErrorCode::InvalidArgument, "weft compile --check takes a plan file, not an algorithm");
      run_check(*args);
      return;
    }
    if (args->algo.empty()) fail(ErrorCode::InvalidArgument, "weft compile needs an algorithm (a file or a built-in name)");
    if (!args->size.empty() || args->scheduler == "auto") run_compile_sized(*args);
    else run_compile(*args);
  });
}

}  // namespace weft::cli
