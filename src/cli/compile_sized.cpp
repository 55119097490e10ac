// `weft compile --size S [--scheduler auto]`: a plan for calls of one size, its instances
// tuned by the simulator (sim/autotune.hpp) or its schedule chosen by it among the
// compiler's schedulers and an MSCCL file's own (sim/choose.hpp). docs/compile.md,
// "Automatic instances" and "Choosing a schedule".
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/compile_args.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "plan/builder.hpp"
#include "sim/choose.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::cli {
namespace {

nlohmann::json candidate_json(const sim::ScheduleCandidate& c) {
  nlohmann::json j = {{"scheduler", c.scheduler}, {"tbs_per_rank_max", c.tbs}};
  if (!c.error.empty()) {
    j["error"] = c.error;
    return j;
  }
  j["time_us"] = c.time_us;
  j["busbw_GBps"] = c.busbw_GBps;
  j["tb_idle_mean"] = c.tb_idle_mean;
  j["variant"] = c.variant;
  return j;
}

}  // namespace

void run_compile_sized(const CompileArgs& a) {
  if (a.size.empty()) fail(ErrorCode::InvalidArgument, "--scheduler auto chooses per call size: give --size BYTES");
  if (a.scheduler == "as-given")
    fail(ErrorCode::InvalidArgument, "--size tunes a compiled schedule; as-given is the file's own (use --scheduler auto to compare)");
  if (a.topology.empty()) fail(ErrorCode::InvalidArgument, "weft compile needs --topology (a preset such as a100-2x4, or a file)");
  sim::TuneOptions to;
  to.bytes = parse_option("--size", [&] { return text::parse_bytes(a.size); });
  if (a.microbatch == "runtime") to.sim.runtime_microbatch = true;
  else to.sim.microbatch_bytes = parse_option("--microbatch", [&] { return text::parse_bytes(a.microbatch); });
  to.sim.fifo_depth = a.fifo_depth > 0 ? a.fifo_depth : 1;
  to.max_tbs = a.max_tbs;
  to.tolerance = a.tolerance;
  to.max_idle = a.max_idle;
  to.idle_cost = a.idle_cost;
  BuildOptions bo;
  CompileOptions& o = bo.compile;
  o.scheduler = a.scheduler == "auto" ? "hpds" : a.scheduler;
  o.allocator = a.allocator;
  o.instances = a.instances;
  o.in_place = !a.out_of_place;
  o.fuse = !a.no_fuse;
  o.aggregate = !a.no_aggregate;
  o.protocol = a.protocol;
  o.fifo_depth = a.fifo_depth;
  o.max_memory_bytes = memory_budget_bytes(a.memory_budget);
  check_build_options(bo);
  const Topology topo = load_topology(a.topology);
  SourceOptions so;
  so.params = text::parse_kv_list(a.params);
  so.verify = !a.no_verify;
  const PlanSource src = load_source(a.algo, topo, so);
  o.in_place = compile_in_place(src, !a.out_of_place);
  if (!src.algorithm) fail(ErrorCode::InvalidArgument, a.algo + " is a plan file, compiled already");
  if (a.instances > 0)
    fail(ErrorCode::InvalidArgument, "--size tunes derived instances: leave out --instances (or compile without --size)");
  if (a.no_tune) to.max_trials = 1;  // each scheduler's own plan only
  const std::vector<std::string> scheds =
      a.scheduler == "auto" ? sim::auto_schedulers(src.given.has_value()) : std::vector<std::string>{o.scheduler};
  const sim::ScheduleChoice ch =
      sim::choose_schedule(*src.algorithm, src.given ? &*src.given : nullptr, topo, o, to, scheds);
  check_deadlock_or_throw(ch.plan, a.fifo_depth);
  if (!a.output.empty()) save_plan(ch.plan, a.output);
  if (a.json) {
    nlohmann::json j = plan_summary_json(ch.plan);
    nlohmann::json cands = nlohmann::json::array();
    for (const sim::ScheduleCandidate& c : ch.candidates) cands.push_back(candidate_json(c));
    j["selection"] = {{"bytes", to.bytes},
                      {"chosen", ch.scheduler},
                      {"why", ch.reason},
                      {"max_tbs", ch.max_tbs},
                      {"candidates", cands}};
    if (ch.compiled) {
      j["instances"] = {{"nvlink", ch.compiled->instances_intra},
                        {"network", ch.compiled->instances_inter},
                        {"local", ch.compiled->instances_local}};
      j["tasks"] = ch.compiled->tasks;
    }
    j["plan"] = a.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.output);
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  const Plan& p = ch.plan;
  std::printf("%s on %s for %s calls: %s (%s allocation, %s-level execution), %d thread blocks per rank at most\n",
              p.algorithm.c_str(), p.topology.c_str(), text::format_bytes(to.bytes).c_str(), ch.scheduler.c_str(),
              p.allocator.c_str(), std::string(to_string(p.execution)).c_str(), p.max_tbs_per_rank());
  std::printf("  why: %s\n", ch.reason.c_str());
  for (const sim::ScheduleCandidate& c : ch.candidates) {
    if (!c.error.empty()) std::printf("  %-9s %s\n", c.scheduler.c_str(), c.error.c_str());
    else
      std::printf("  %-9s %10.1f us %8.1f GB/s busbw %4d TBs/rank  %s\n", c.scheduler.c_str(), c.time_us, c.busbw_GBps, c.tbs,
                  c.variant.c_str());
  }
  if (!a.output.empty()) std::printf("plan written to %s\n", a.output.c_str());
}

}  // namespace weft::cli
