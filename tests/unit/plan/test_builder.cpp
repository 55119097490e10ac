// The plan builder (src/plan/): every source kind gives the plan the drivers gave before it
// existed (load_algorithm sized to the topology, verify, compile; an XML file's own schedule;
// compile_for_runtime), a plan file comes back as it was written, and bad inputs are refused
// with a located error before anything is compiled.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "compile/compiler.hpp"
#include "compile/verify.hpp"
#include "ir/plan_core.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_import.hpp"
#include "plan/builder.hpp"
#include "plan/plan_file.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

const std::string kData = WEFT_TEST_DATA_DIR;
const std::string kRingXml = kData + "/tests/data/msccl/hand/ring_allreduce_2ch.xml";  // 4 GPUs, buffered ring

std::string temp_path(const std::string& name) { return testing::TempDir() + "weft_plan_" + name; }

// What `weft compile`, `weft simulate` and plan_source did before the builder: the algorithm
// sized to the topology, verified, compiled.
Plan old_driver_plan(const std::string& name, const Topology& topo, const CompileOptions& o) {
  Algorithm a = load_algorithm(name, params_for_topology(topo, {}));
  verify_or_throw(a);
  return compile(a, topo, o).plan;
}

template <class F>
std::string error_of(F&& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

TEST(PlanBuilder, SourceKindsByForm) {
  EXPECT_EQ(source_kind("ring_allreduce"), SourceKind::Builtin);
  EXPECT_EQ(source_kind("dsl:ring_allreduce"), SourceKind::ChunkDsl);
  EXPECT_EQ(source_kind("x/ring.rccl"), SourceKind::ResCCL);
  EXPECT_EQ(source_kind("ring.rccl"), SourceKind::ResCCL);
  EXPECT_EQ(source_kind("ring.xml"), SourceKind::MscclXml);
  EXPECT_EQ(source_kind("plan.json"), SourceKind::PlanFile);
  EXPECT_TRUE(is_plan_file_path("a/b.json"));
  EXPECT_FALSE(is_plan_file_path(".json"));
  EXPECT_FALSE(is_plan_file_path("json"));
}

TEST(PlanBuilder, BuiltinsGiveTheOldDriversPlans) {
  const std::pair<const char*, const char*> cases[] = {{"ring_allreduce", "h200-1x8"},  {"hm_allreduce", "a100-2x4"},
                                                       {"allpairs_allgather", "h200-1x4"}, {"ring_reducescatter", "a100-2x4"},
                                                       {"alltoall_direct", "h200-1x4"},  {"chain_broadcast", "h200-1x4"}};
  for (const auto& [name, topo_name] : cases)
    for (const char* sched : {"hpds", "rr", "gc3"}) {
      const Topology topo = topology_preset(topo_name);
      BuildOptions bo;
      bo.compile.scheduler = sched;
      bo.compile.keep_graph = false;
      const BuiltPlan b = build_plan(name, topo, {}, bo);
      EXPECT_EQ(b.kind, SourceKind::Builtin);
      EXPECT_TRUE(b.compiled);
      EXPECT_GT(b.transfers, 0);
      EXPECT_TRUE(b.plan() == old_driver_plan(name, topo, bo.compile)) << name << " on " << topo_name << " " << sched;
    }
}

TEST(PlanBuilder, RuntimeRuleIsCompileForRuntime) {
  const Topology topo = topology_preset("h200-1x8");
  BuildOptions bo;
  bo.compile.instances = 24;
  bo.runtime_rule = true;
  for (const char* name : {"hm_allreduce", "ring_allreduce"}) {
    Algorithm a = load_algorithm(name, params_for_topology(topo, {}));
    EXPECT_TRUE(build_plan(name, topo, {}, bo).plan() == compile_for_runtime(a, topo, bo.compile).plan) << name;
  }
}

TEST(PlanBuilder, RcclFileAndChunkDslGiveTheBuiltinsPlan) {
  const Topology topo = topology_preset("a100-2x4");
  BuildOptions bo;
  for (const char* name : {"ring_allreduce", "allpairs_allreduce", "hm_allreduce", "alltoall_twostep"}) {
    const Plan builtin = build_plan(name, topo, {}, bo).plan();
    const BuiltPlan file = build_plan(data_dir() + "/algorithms/" + name + ".rccl", topo, {}, bo);
    EXPECT_EQ(file.kind, SourceKind::ResCCL);
    EXPECT_TRUE(file.plan() == builtin) << name;
    // The chunk-DSL twins trace the same transfers; all but HM in the same order, so the
    // compiler gives the same plan (hm_allreduce.rccl lists them rank-major, the DSL program
    // step by step: tests/unit/xml/test_chunk_dsl.cpp).
    BuiltPlan dsl = build_plan(std::string("dsl:") + name, topo, {}, bo);
    EXPECT_EQ(dsl.kind, SourceKind::ChunkDsl);
    EXPECT_EQ(dsl.transfers, file.transfers) << name;
    if (std::string(name) == "hm_allreduce") continue;
    Plan d = dsl.plan();
    d.algorithm = builtin.algorithm;  // the names differ
    EXPECT_TRUE(d == builtin) << "dsl:" << name;
  }
  EXPECT_NE(error_of([&] { build_plan("dsl:nosuch", topo, {}, bo); }).find("is no chunk-DSL algorithm"), std::string::npos);
  EXPECT_NE(error_of([&] { build_plan("dsl:ring_allreduce", topo, SourceOptions{{{"Root", "1"}}}, bo); })
                .find("takes no parameter 'Root'"),
            std::string::npos);
}

TEST(PlanBuilder, MscclXmlCompiledAndAsGiven) {
  const Topology topo = topology_preset("h200-1x4");
  MscclImport imp = import_msccl_file(kRingXml, msccl_options_from_params(params_for_topology(topo, {}), kRingXml));
  BuildOptions bo;
  const BuiltPlan compiled = build_plan(kRingXml, topo, {}, bo);
  EXPECT_EQ(compiled.kind, SourceKind::MscclXml);
  EXPECT_TRUE(compiled.plan() == compile(imp.algorithm, topo, bo.compile).plan);
  bo.compile.scheduler = "as-given";
  const BuiltPlan given = build_plan(kRingXml, topo, {}, bo);
  EXPECT_FALSE(given.compiled);
  Plan want = imp.as_given;
  want.topology = topo.name;
  EXPECT_TRUE(given.plan() == want);
  EXPECT_EQ(given.result.tasks, static_cast<int32_t>(imp.algorithm.transfers.size()));
  // The file's ring sends before it receives: it needs buffered connections.
  bo.compile.fifo_depth = 0;
  try {
    build_plan(kRingXml, topo, {}, bo);
    ADD_FAILURE() << "a ring that sends before it receives passed at depth 0";
  } catch (const DeadlockError& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_FALSE(e.verdict.ok);
    EXPECT_FALSE(e.verdict.unpaired);
    EXPECT_FALSE(e.verdict.cycle.empty());
  }
  bo.compile.fifo_depth = 4;
  SourceOptions as_given_only;
  as_given_only.as_given_only = true;
  EXPECT_NE(error_of([&] { build_plan(kRingXml, topology_preset("h200-1x8"), as_given_only, bo); })
                .find("is for 4 gpus, topology h200-1x8 has 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] { build_plan("ring_allreduce", topo, {}, bo); }).find("is not an .xml file"), std::string::npos);
}

TEST(PlanBuilder, PlanFileComesBackAsWritten) {
  const Topology topo = topology_preset("a100-2x4");
  BuildOptions bo;
  const Plan compiled = build_plan("hm_allreduce", topo, {}, bo).plan();
  const std::string path = temp_path("hm.json");
  save_plan(compiled, path);
  // Options that would change a compiled plan do not apply; the deadlock check does.
  bo.compile.scheduler = "rr";
  bo.compile.instances = 3;
  const BuiltPlan b = build_plan(path, topo, {}, bo);
  EXPECT_EQ(b.kind, SourceKind::PlanFile);
  EXPECT_FALSE(b.compiled);
  EXPECT_EQ(b.transfers, 0);
  EXPECT_TRUE(b.plan() == compiled);
  ErrorCode code{};
  EXPECT_NE(error_of([&] { build_plan(path, topology_preset("h200-1x4"), {}, bo); }, &code)
                .find(path + ": the plan is for 8 ranks, topology h200-1x4 has 4"),
            std::string::npos);
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_NE(error_of([&] { build_plan(path, topo, SourceOptions{{{"nRanks", "8"}}}, bo); }).find("takes no parameters"),
            std::string::npos);
  std::remove(path.c_str());
}

TEST(PlanBuilder, PlanFileThatDeadlocksIsRefused) {
  const Topology topo = topology_preset("h200-1x4");
  BuildOptions bo;
  bo.compile.scheduler = "as-given";
  const std::string path = temp_path("ring2ch.json");
  save_plan(build_plan(kRingXml, topo, {}, bo).plan(), path);
  bo.compile.scheduler = "hpds";
  EXPECT_NO_THROW(build_plan(path, topo, {}, bo));
  bo.compile.fifo_depth = 0;
  ErrorCode code{};
  const std::string e = error_of([&] { build_plan(path, topo, {}, bo); }, &code);
  EXPECT_EQ(code, ErrorCode::Verify);
  EXPECT_NE(e.find(path + ": the plan can deadlock with FIFOs of 0 messages"), std::string::npos) << e;
  std::remove(path.c_str());
}

TEST(PlanBuilder, BadPlanFilesGiveLocatedErrors) {
  const Topology topo = topology_preset("h200-1x4");
  const std::string path = temp_path("bad.json");
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("{\"format\": ");
  ErrorCode code{};
  std::string e = error_of([&] { build_plan(path, topo, {}, {}); }, &code);
  EXPECT_EQ(code, ErrorCode::Parse);
  EXPECT_EQ(e.rfind(path + ":", 0), 0u) << e;
  // A valid plan whose rank list is cut short: refused naming the file before it is checked.
  std::string text = plan_to_json(build_plan("ring_allreduce", topo, {}, {}).plan());
  text.replace(text.find("\"num_ranks\": 4"), 14, "\"num_ranks\": 5");
  write(text);
  e = error_of([&] { build_plan(path, topo, {}, {}); }, &code);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_TRUE(code == ErrorCode::Parse || code == ErrorCode::Verify) << e;
  std::remove(path.c_str());
  EXPECT_NE(error_of([&] { build_plan(temp_path("missing.json"), topo, {}, {}); }, &code).find(temp_path("missing.json")),
            std::string::npos);
  EXPECT_EQ(code, ErrorCode::System);
}

// The verifier refuses a wrong algorithm before anything is compiled; --no-verify skips it.
TEST(PlanBuilder, VerifierRefusesBeforeCompiling) {
  const Topology topo = topology_preset("h200-1x4");
  const std::string bad = kData + "/tests/data/broken/missing_transfer.rccl";
  ErrorCode code{};
  error_of([&] { load_source(bad, topo); }, &code);
  EXPECT_EQ(code, ErrorCode::Verify);
  SourceOptions no_verify;
  no_verify.verify = false;
  const PlanSource s = load_source(bad, topo, no_verify);
  EXPECT_FALSE(s.verified);
  ASSERT_TRUE(s.algorithm.has_value());
  // Unknown options are refused before the parse.
  BuildOptions bo;
  bo.compile.scheduler = "bogus";
  EXPECT_NE(error_of([&] { build_plan(temp_path("never_read.rccl"), topo, {}, bo); }).find("unknown scheduler 'bogus'"),
            std::string::npos);
}

}  // namespace
}  // namespace weft
