// Plan files: round trip, and one clear error for each kind of bad file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "ir/plan_json.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

std::string error_of(const std::string& text) {
  try {
    plan_from_json(text, "bad.json");
  } catch (const Error& e) {
    return std::string(e.code() == ErrorCode::Parse ? "Parse" : e.code() == ErrorCode::Verify ? "Verify" : "other") + ": " +
           e.what();
  }
  return "";
}

std::string small_plan_json() {
  return plan_to_json(compile(test::ring_allreduce(2), test::a100(1, 2)).plan);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(PlanJson, RoundTripsExactly) {
  for (const test::Case& c : test::all_cases())
    for (const char* sched : {"hpds", "stage"})
      for (bool in_place : {true, false}) {
        CompileOptions o;
        o.scheduler = sched;
        o.in_place = in_place;
        o.instances = 2;
        Plan p = compile(c.algo, c.topo, o).plan;
        p.algorithm += " \"quoted\"\\";
        Plan q = plan_from_json(plan_to_json(p), "mem");
        EXPECT_EQ(p, q) << c.algo.name;
      }
}

TEST(PlanJson, SavesAndLoadsFiles) {
  Plan p = compile(test::hm_allreduce(2, 2), test::a100(2, 2)).plan;
  std::string path = testing::TempDir() + "weft_plan_test_" + std::to_string(getpid()) + ".json";
  save_plan(p, path);
  EXPECT_EQ(load_plan(path), p);
  std::remove(path.c_str());
  try {
    load_plan(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::System);
    EXPECT_EQ(std::string(e.what()), "cannot read plan file " + path);
  }
}

TEST(PlanJson, BadFilesAreOneClearError) {
  std::string good = small_plan_json();
  EXPECT_EQ(error_of(good), "");
  // Malformed text names the file, line and column (util::parse_json, as the selection table
  // and the topology file do).
  EXPECT_NE(error_of("{\n  \"format\": ").find("Parse: bad.json:2:13: the plan is not valid JSON ("), std::string::npos)
      << error_of("{\n  \"format\": ");
  EXPECT_EQ(error_of("[1, 2]"), "Parse: bad.json: (top): expected a JSON object");
  // A number past double's range is out_of_range in nlohmann, not parse_error (found by fuzzing).
  EXPECT_NE(error_of("{\"rc\": [\"output\", 4444.4e44444]}").find("Parse: bad.json: the plan is not valid JSON ("),
            std::string::npos);
  EXPECT_EQ(error_of(replace(good, "\"weft-plan\"", "\"msccl\"")),
            "Parse: bad.json: format: is \"msccl\", expected \"weft-plan\"");
  EXPECT_EQ(error_of(replace(good, "\"version\": 1", "\"version\": 2")),
            "Parse: bad.json: version: plan format version 2 is not supported (this weft reads version 1)");
  EXPECT_EQ(error_of(replace(good, "\"num_ranks\": 2", "\"num_ranks\": \"2\"")),
            "Parse: bad.json: (top).num_ranks: expected an integer");
  EXPECT_EQ(error_of(replace(good, "\"primitive\": \"rrc\"", "\"primitive\": \"teleport\"")),
            "Parse: bad.json: ranks[0].tbs[0].slots[0].primitive: unknown primitive \"teleport\"");
  EXPECT_EQ(error_of(replace(good, "\"src\": [\"output\",", "\"src\": [\"elsewhere\",")),
            "Parse: bad.json: ranks[0].tbs[0].slots[0].src: unknown buffer \"elsewhere\" (input, output or scratch)");
  EXPECT_EQ(error_of(replace(good, ", \"count\": 1", "")),
            "Parse: bad.json: ranks[0].tbs[0].slots[0]: missing field \"count\"");
  // Well-formed JSON, inconsistent plan: the structural check names the slot.
  std::string bad_peer = error_of(replace(good, "\"send_peer\": 1", "\"send_peer\": 5"));
  EXPECT_EQ(bad_peer.substr(0, 24), "Verify: bad.json: plan: ");
  EXPECT_NE(bad_peer.find("send peer 5 is not another rank in [0, 2)"), std::string::npos) << bad_peer;
}

TEST(PlanJson, UnknownFieldsProtocolsAndRootsAreRefused) {
  const std::string good = small_plan_json();
  EXPECT_EQ(error_of(replace(good, "\"protocol\": \"Simple\"", "\"protocol\": \"LL256\"")),
            "Parse: bad.json: protocol: is \"LL256\", expected \"Simple\", \"LL\" or \"LL128\"");
  for (const char* p : {"LL", "LL128"}) EXPECT_EQ(error_of(replace(good, "\"Simple\"", std::string("\"") + p + "\"")), "");
  EXPECT_EQ(error_of(replace(good, "\"root\": 0", "\"root\": 99")), "Parse: bad.json: root: 99 is not a rank in [0, 2)");
  EXPECT_EQ(error_of(replace(good, "\"root\": 0", "\"root\": -1")), "Parse: bad.json: root: -1 is not a rank in [0, 2)");
  EXPECT_EQ(error_of(replace(good, "\"root\": 0", "\"root\": 1")), "");
  const std::string slot_fields =
      " (the fields are primitive, send_peer, recv_peer, channel, src, dst, count, instance, instances, subpipeline, deps, "
      "tasks; docs/plan-format.md)";
  EXPECT_EQ(error_of(replace(good, ", \"count\": 1", ", \"count\": 1, \"cuont\": 1")),
            "Parse: bad.json: ranks[0].tbs[0].slots[0]: unknown field \"cuont\"" + slot_fields);
  EXPECT_NE(error_of(replace(good, "\"root\": 0", "\"root\": 0, \"roots\": 0")).find("(top): unknown field \"roots\""),
            std::string::npos);
  EXPECT_NE(error_of(replace(good, "{\"rank\": 1, ", "{\"rank\": 1, \"gpu\": 3, ")).find("ranks[1]: unknown field \"gpu\""),
            std::string::npos);
  EXPECT_NE(error_of(replace(good, "{\"slots\": [", "{\"sm\": 0, \"slots\": [")).find("ranks[0].tbs[0]: unknown field \"sm\""),
            std::string::npos);
}

}  // namespace
}  // namespace weft
