#include "plan/builder.hpp"

#include "compile/allocate.hpp"

#include <chrono>
#include <filesystem>

#include "compile/deadlock.hpp"
#include "compile/schedule.hpp"
#include "compile/verify.hpp"
#include "ir/plan_json.hpp"
#include "lang/chunk_dsl_algorithms.hpp"
#include "lang/load.hpp"
#include "lang/msccl_import.hpp"
#include "lang/python_frontend.hpp"
#include "plan/plan_file.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

constexpr std::string_view kDslPrefix = "dsl:";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string_view to_string(SourceKind kind) {
  switch (kind) {
    case SourceKind::Builtin: return "built-in";
    case SourceKind::ResCCL: return "ResCCLang file";
    case SourceKind::ChunkDsl: return "chunk-DSL built-in";
    case SourceKind::MscclXml: return "MSCCL XML file";
    case SourceKind::PlanFile: return "plan file";
    case SourceKind::Python: return "Python program";
  }
  return "?";
}

SourceKind source_kind(const std::string& source) {
  if (is_plan_file_path(source)) return SourceKind::PlanFile;
  if (source.rfind(kDslPrefix, 0) == 0) return SourceKind::ChunkDsl;
  if (is_python_path(source)) return SourceKind::Python;
  if (is_msccl_xml_path(source)) return SourceKind::MscclXml;
  std::error_code ec;
  if (source.find('/') != std::string::npos || source.ends_with(".rccl") ||
      std::filesystem::is_regular_file(source, ec))
    return SourceKind::ResCCL;
  return SourceKind::Builtin;
}

std::map<std::string, std::string> params_for_topology(const Topology& topo, std::map<std::string, std::string> params) {
  params.try_emplace("nRanks", std::to_string(topo.num_gpus()));
  params.try_emplace("GPUPerNode", std::to_string(topo.gpus_per_node));
  if (topo.nics_per_node > 0) params.try_emplace("NICPerNode", std::to_string(topo.nics_per_node));
  return params;
}

PlanSource load_source(const std::string& source, const Topology& topo, const SourceOptions& options) {
  PlanSource s;
  s.kind = source_kind(source);
  s.name = source;
  const std::map<std::string, std::string> sized =
      options.size_to_topology ? params_for_topology(topo, options.params) : options.params;
  auto t0 = std::chrono::steady_clock::now();
  switch (s.kind) {
    case SourceKind::PlanFile:
      // Compiled already: its shape is its own. No front-end is called on this path.
      if (!options.params.empty())
        fail(ErrorCode::InvalidArgument, source + ": a plan file takes no parameters (it is compiled already)");
      s.given = load_plan(source);
      break;
    case SourceKind::ChunkDsl:
      s.algorithm = dsl::builtin(source.substr(kDslPrefix.size()), sized);
      break;
    case SourceKind::MscclXml: {
      MscclImport imp = import_msccl_file(
          source, msccl_options_from_params(options.as_given_only ? options.params : sized,
                                            source));
      s.algorithm = std::move(imp.algorithm);
      s.given = std::move(imp.as_given);
      break;
    }
    case SourceKind::Python:
      s.algorithm = load_python_program(source, sized);
      break;
    case SourceKind::Builtin:
    case SourceKind::ResCCL:
      s.algorithm = load_algorithm(source, sized);
      break;
  }
  s.parse_seconds = seconds_since(t0);
  if (s.algorithm && options.verify) {
    // What the verifier refuses is never compiled, simulated nor run.
    auto t1 = std::chrono::steady_clock::now();
    verify_or_throw(*s.algorithm);
    s.verify_seconds = seconds_since(t1);
    s.verified = true;
  }
  return s;
}

void check_build_options(const BuildOptions& options) {
  const std::string& sched = options.compile.scheduler;
  bool known = sched == "as-given";
  for (std::string_view n : scheduler_names()) known = known || n == sched;
  if (!known)
    fail(ErrorCode::InvalidArgument,
         "unknown scheduler '" + sched + "' (known: hpds, algo, stage, rr, gc3; as-given for .xml files)");
  check_allocator_name(options.compile.allocator);
}

bool compile_in_place(const PlanSource& source, bool in_place_asked) {
  return in_place_asked && !(source.given && source.kind == SourceKind::MscclXml && !source.given->in_place);
}

BuiltPlan build_plan(const PlanSource& source, const Topology& topo, const BuildOptions& options) {
  BuiltPlan b;
  b.kind = source.kind;
  b.transfers = source.algorithm ? static_cast<int64_t>(source.algorithm->transfers.size()) : 0;
  auto t0 = std::chrono::steady_clock::now();
  const int32_t fifo = options.compile.fifo_depth;
  if (source.kind == SourceKind::PlanFile) {
    b.result.plan = *source.given;
    check_plan_file(b.result.plan, source.name, topo.num_gpus(), "topology " + topo.name, fifo);
  } else {
    check_build_options(options);
    if (options.compile.scheduler == "as-given") {
      // An MSCCL XML file's own thread blocks, steps and dependencies (docs/msccl-xml.md),
      // the baseline weft's schedules are measured against. No compiler stage runs.
      if (!source.given)
        fail(ErrorCode::InvalidArgument, "scheduler as-given runs an MSCCL XML file's own schedule; '" + source.name +
                                             "' is not an .xml file");
      if (topo.num_gpus() != source.given->num_ranks)
        fail(ErrorCode::InvalidArgument, source.name + " is for " + std::to_string(source.given->num_ranks) +
                                             " gpus, topology " + topo.name + " has " + std::to_string(topo.num_gpus()));
      b.result.plan = *source.given;
      b.result.plan.topology = topo.name;
      check_deadlock_or_throw(b.result.plan, fifo);  // MSCCL's files rely on buffered connections
    } else {
      b.result = options.runtime_rule ? compile_for_runtime(*source.algorithm, topo, options.compile)
                                      : compile(*source.algorithm, topo, options.compile);
      b.compiled = true;
    }
  }
  b.build_seconds = seconds_since(t0);
  b.result.seconds.parse = source.parse_seconds;
  b.result.seconds.verify = source.verify_seconds;
  b.result.seconds.total += source.parse_seconds + source.verify_seconds;
  if (!b.compiled) {
    int64_t slots = 0;
    for (const RankPlan& rp : b.result.plan.ranks)
      for (const ThreadBlock& tb : rp.tbs) slots += static_cast<int64_t>(tb.slots.size());
    b.result.slots = slots;
    b.result.tasks = static_cast<int32_t>(b.transfers);
  }
  return b;
}

nlohmann::json plan_summary_json(const Plan& plan) {
  nlohmann::json j;
  j["algorithm"] = plan.algorithm;
  j["topology"] = plan.topology;
  j["scheduler"] = plan.scheduler;
  j["allocator"] = plan.allocator;
  j["execution"] = std::string(to_string(plan.execution));
  j["in_place"] = plan.in_place;
  j["ranks"] = plan.num_ranks;
  j["subpipelines"] = plan.num_subpipelines;
  j["tbs_per_rank_max"] = plan.max_tbs_per_rank();
  j["tbs_per_rank_mean"] = plan.mean_tbs_per_rank();
  return j;
}

BuiltPlan build_plan(const std::string& source, const Topology& topo, const SourceOptions& source_options,
                     const BuildOptions& options) {
  if (!is_plan_file_path(source)) check_build_options(options);  // before a possibly long parse
  return build_plan(load_source(source, topo, source_options), topo, options);
}

}  // namespace weft
