// The plan builder: the one place where a source becomes a checked Plan, for `weft compile`,
// `weft simulate`, `weft bench` and the runtime (plan/plan_source.cpp).
//
// A source is one of (source_kind tells them apart by form):
//   a built-in algorithm's name   algorithms/<name>.rccl                  (ResCCLang)
//   a ResCCLang file              *.rccl, or any path that is not one of the below
//   a chunk-DSL built-in          dsl:<name> (lang/chunk_dsl_algorithms.hpp)
//   an MSCCL XML file             *.xml (its own schedule with scheduler "as-given")
//   a plan file                   *.json, as `weft compile -o` writes it (plan_file.hpp)
//   a Python program              *.py, run with weft's module (lang/python_frontend.hpp)
//
// load_source parses (sized to the topology: nRanks, GPUPerNode and NICPerNode default to the
// topology's) and runs the symbolic verifier, which refuses a wrong algorithm before anything
// is compiled. build_plan then compiles it (or takes the XML file's own schedule, or the plan
// file as it is) and checks the result: the compiler's plans are deadlock-checked by compile()
// at CompileOptions::fifo_depth, an as-given schedule or a plan file here, after their rank
// count is checked against the topology's GPUs. A plan file's path calls no front-end.
#pragma once

#include <map>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "compile/compiler.hpp"
#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "ir/topology.hpp"

namespace weft {

enum class SourceKind { Builtin, ResCCL, ChunkDsl, MscclXml, PlanFile, Python };
std::string_view to_string(SourceKind kind);

/// The kind of `source` by its form (see above); a name that is no file is a built-in.
SourceKind source_kind(const std::string& source);

/// The --param map with the algorithm's shape taken from the topology where the caller did
/// not set it: nRanks = GPUs, GPUPerNode = GPUs per node, NICPerNode = NICs per node (when
/// the topology has NICs). ResCCLang lets every header parameter be overridden.
std::map<std::string, std::string> params_for_topology(const Topology& topo, std::map<std::string, std::string> params);

struct SourceOptions {
  std::map<std::string, std::string> params;  ///< --param, before params_for_topology
  bool verify = true;                         ///< run the symbolic verifier (off: --no-verify)
  /// Fill nRanks, GPUPerNode and NICPerNode from the topology where `params` does not set
  /// them (params_for_topology). The runtime sets its own shape and turns this off.
  bool size_to_topology = true;
  /// An .xml file loaded for its own schedule only (`weft compile --scheduler as-given`):
  /// its parameters are the caller's, not sized to the topology, so that a file for another
  /// GPU count is refused by build_plan naming both counts.
  bool as_given_only = false;
};

/// A parsed and verified source.
struct PlanSource {
  SourceKind kind = SourceKind::Builtin;
  std::string name;                    ///< as given
  std::optional<Algorithm> algorithm;  ///< every kind but a plan file
  std::optional<Plan> given;           ///< a plan file, or an .xml file's own schedule
  double parse_seconds = 0, verify_seconds = 0;
  bool verified = false;
};

/// Parses `source` for `topo` and verifies its algorithm (unless options.verify is off).
/// Throws weft::Error: Parse (file:line:column) for malformed text, InvalidArgument for an
/// unknown name or parameter, System for an unreadable file, Verify for a wrong algorithm
/// or a structurally inconsistent plan file (naming the file and the JSON path).
PlanSource load_source(const std::string& source, const Topology& topo, const SourceOptions& options = {});

/// The buffer layout the command-line tools compile `source` for: in place unless asked
/// otherwise, except that an MSCCL file imported for out-of-place buffers only (it does not
/// declare in place, or `InPlace=0`) is compiled out of place too, so that its own schedule and
/// the compiler's are compared, and chosen between, for the same buffers.
bool compile_in_place(const PlanSource& source, bool in_place_asked);

struct BuildOptions {
  /// scheduler "as-given" keeps an .xml file's own schedule; fifo_depth is the deadlock
  /// check's for every kind. A plan file ignores the rest (it is compiled already).
  CompileOptions compile;
  /// The GPU runtime's rule (compile_for_runtime): if the busiest rank needs more than
  /// kRuntimePlanMaxTbs thread blocks, compile again with derived instances within it.
  bool runtime_rule = false;
};

struct BuiltPlan {
  SourceKind kind = SourceKind::Builtin;
  /// result.plan is the plan; the compiler's figures (tasks, slots, instances, phase times)
  /// are filled when `compiled`. seconds.parse and seconds.verify are the source's.
  CompileResult result;
  bool compiled = false;        ///< false: a plan file or an .xml file's own schedule
  double build_seconds = 0;     ///< wall time of build_plan (compile, or check)
  int64_t transfers = 0;        ///< the algorithm's transfers (0 for a plan file)
  const Plan& plan() const { return result.plan; }
};

/// Refuses an unknown scheduler (hpds, algo, stage, rr, gc3, as-given) or allocator (state,
/// conn) with InvalidArgument; build_plan calls it, callers may too before a long parse.
void check_build_options(const BuildOptions& options);

/// Builds and checks the plan of a loaded source for `topo`. Throws InvalidArgument for an
/// unknown scheduler, allocator or protocol, as-given for a source that is no .xml file, or
/// a plan (file) for another rank count than the topology's GPUs; Verify for a plan that can
/// deadlock with FIFOs of options.compile.fifo_depth messages.
BuiltPlan build_plan(const PlanSource& source, const Topology& topo, const BuildOptions& options);

/// A plan's description as `weft compile --json` starts it (and the Python module's
/// Plan.summary()): algorithm, topology, scheduler, allocator, execution, in_place, ranks,
/// subpipelines, tbs_per_rank_max, tbs_per_rank_mean.
nlohmann::json plan_summary_json(const Plan& plan);

/// load_source then build_plan.
BuiltPlan build_plan(const std::string& source, const Topology& topo, const SourceOptions& source_options,
                     const BuildOptions& options);

}  // namespace weft
