// Tables for one rank count (selection/ranks-N.json, docs/runtime.md "Tables per rank
// count"): a communicator of N ranks takes N's table first and falls back to the default
// rows for every call that table leaves out, and for every rank count no table is for.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <string>

#include "tune/decide.hpp"
#include "tune/selection.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

const Collective kAll[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                           Collective::AllToAll,  Collective::Broadcast, Collective::Reduce};

std::string describe(const Choice& c) {
  return c.algorithm + "/" + c.protocol + "/" + std::to_string(c.instances) + "/" + c.scheduler + "/" + c.allocator;
}

// A table measured on 4 GPUs: AllReduce and Broadcast only, AllReduce only up to 1 MiB.
const char* kFour = R"({"format": "weft-selection", "version": 1, "description": "weft tune on 4 GPUs", "rows": [
  {"collectives": ["AllReduce"], "ranks": [4, 4], "bytes": [0, 1048576], "algorithm": "ring_allreduce",
   "scheduler": "hpds", "protocol": "LL", "instances": 7},
  {"collectives": ["Broadcast"], "algorithm": "chain_broadcast", "protocol": "Simple", "instances": 3}
]})";

// A table for 2 GPUs whose one row covers everything.
const char* kTwo = R"({"format": "weft-selection", "version": 1, "rows": [
  {"collectives": ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Broadcast", "Reduce"],
   "algorithm": "allpairs", "protocol": "Simple", "instances": 5}
]})";

SelectionTable composed() {
  std::vector<std::pair<int, SelectionTable>> per;
  per.emplace_back(2, parse_selection_table(kTwo, "ranks-2.json"));
  per.emplace_back(4, parse_selection_table(kFour, "ranks-4.json"));
  return compose_selection_tables(default_json_table(), per);
}

std::vector<uint64_t> sizes() {
  std::vector<uint64_t> v;
  for (uint64_t b = 8; b <= (1ull << 30); b *= 4) v.insert(v.end(), {b, b + 8, 3 * b / 2});
  return v;
}

TEST(SelectionRanks, ATableForOneRankCountWinsThere) {
  const SelectionTable t = composed();
  EXPECT_EQ(t.origin, "ranks-2.json, ranks-4.json, " + default_json_table().origin);
  EXPECT_EQ(t.rows.size(), default_json_table().rows.size() + 3);
  EXPECT_EQ(describe(t.choose(Collective::AllReduce, 1 << 20, 4)), "ring_allreduce/LL/7/hpds/state");
  EXPECT_EQ(describe(t.choose(Collective::AllReduce, 8, 4, true)), "ring_allreduce/LL/7/hpds/state");
  EXPECT_EQ(describe(t.choose(Collective::Broadcast, 1 << 30, 4)), "chain_broadcast/Simple/3/hpds/state");
  for (Collective c : kAll)
    for (uint64_t b : sizes()) EXPECT_EQ(describe(t.choose(c, b, 2)), "allpairs/Simple/5/hpds/state") << to_string(c) << b;
  // The rows keep their lines in their own file.
  EXPECT_EQ(t.rows[1].line, 2);
  EXPECT_EQ(t.rows[2].line, 4);
}

TEST(SelectionRanks, TheDecisionTakesTheComposedRowsIds) {
  // The rows were parsed once into registry ids; composing keeps them, and decide() reads them.
  const auto t = std::make_shared<const SelectionTable>(composed());
  CommShape four;
  four.nranks = 4;
  const Decision d = Decider(t, four, DecideEnv{}).decide(Call{Collective::AllReduce, 1 << 20, false});
  EXPECT_EQ(d.algorithm, algo::registry().compiled("ring_allreduce", "hpds", "state"));
  EXPECT_EQ(d.protocol, algo::Protocol::LL);
  EXPECT_EQ(d.instances, 7);
  CommShape two;
  two.nranks = 2;
  const Decision d2 = Decider(t, two, DecideEnv{}).decide(Call{Collective::Reduce, 1 << 30, true});
  EXPECT_EQ(d2.algorithm, algo::kAllPairs);
  EXPECT_EQ(d2.executor, algo::Executor::Interpreter);
  EXPECT_EQ(d2.instances, 5);
}

TEST(SelectionRanks, EveryCallTheTableLeavesOutFallsBackToTheDefaultRows) {
  const SelectionTable t = composed();
  int fell_back = 0;
  for (Collective c : kAll)
    for (int R : {1, 3, 4, 5, 8, 16, 1024})
      for (uint64_t b : sizes())
        for (bool in_place : {false, true})
          for (bool plans_only : {false, true}) {
            const bool covered = R == 4 && (c == Collective::Broadcast || (c == Collective::AllReduce && b <= (1u << 20)));
            if (covered) continue;
            SCOPED_TRACE(std::string(to_string(c)) + " " + std::to_string(b) + " B on " + std::to_string(R) + " ranks");
            EXPECT_EQ(describe(t.choose(c, b, R, in_place, plans_only)),
                      describe(default_json_table().choose(c, b, R, in_place, plans_only)));
            ++fell_back;
          }
  EXPECT_GT(fell_back, 1000);
  // The one-shot rows of the default table still apply where the table for 4 leaves AllReduce out.
  EXPECT_EQ(t.choose(Collective::AllGather, 8, 4).algorithm, kOneShot);
}

TEST(SelectionRanks, NoTableIsTheDefaultItself) {
  const SelectionTable t = compose_selection_tables(default_json_table(), {});
  EXPECT_EQ(t.origin, default_json_table().origin);
  EXPECT_EQ(t.rows.size(), default_json_table().rows.size());
}

std::string error_of(const std::vector<std::pair<int, std::string>>& tables) {
  try {
    std::vector<std::pair<int, SelectionTable>> per;
    for (const auto& [n, text] : tables)
      per.emplace_back(n, parse_selection_table(text, "ranks-" + std::to_string(n) + ".json"));
    compose_selection_tables(default_json_table(), per);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse) << e.what();
    return e.what();
  }
  return "";
}

TEST(SelectionRanks, ARowForOtherRankCountsOrASecondTableIsRefused) {
  EXPECT_EQ(error_of({{4, R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllReduce"], "algorithm": "ring", "protocol": "LL", "instances": 2},
    {"collectives": ["AllReduce"], "ranks": [2, 3], "algorithm": "ring", "protocol": "LL", "instances": 2}]})"}}),
            "ranks-4.json:3: rows[1].ranks: [2, 3] leaves out 4, the rank count this table is for");
  EXPECT_EQ(error_of({{4, R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllReduce"], "ranks": [5, null], "algorithm": "ring", "protocol": "LL", "instances": 2}]})"}}),
            "ranks-4.json:2: rows[0].ranks: [5, null] leaves out 4, the rank count this table is for");
  EXPECT_EQ(error_of({{2, kTwo}, {2, kTwo}}), "ranks-2.json: a second table for 2 ranks (one table per rank count)");
  EXPECT_EQ(error_of({{0, kTwo}}), "ranks-0.json: a table for 0 ranks; a communicator has at least 1");
  EXPECT_EQ(error_of({{3, kTwo}, {4, kFour}}), "");
}

TEST(SelectionRanks, TheBuiltInTablesAreTheShippedFiles) {
  // Every selection/ranks-N.json of the source tree is built in, under its N, and the built-in
  // table is their composition with default.json (when the folder has none, the default alone).
  namespace fs = std::filesystem;
  std::map<int, std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(WEFT_TEST_DATA_DIR) / "selection")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ranks-", 0) != 0) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    files[std::stoi(name.substr(6))] = ss.str();
  }
  ASSERT_EQ(builtin_rank_table_texts().size(), files.size());
  size_t rows = parse_selection_table(default_selection_text(), "default.json").rows.size();
  for (const RankTableText& rt : builtin_rank_table_texts()) {
    ASSERT_TRUE(files.count(rt.ranks)) << rt.file;
    EXPECT_EQ(std::string(rt.text), files[rt.ranks]);
    EXPECT_EQ(std::string(rt.file), "ranks-" + std::to_string(rt.ranks) + ".json");
    rows += parse_selection_table(rt.text, std::string(rt.file)).rows.size();
  }
  EXPECT_EQ(default_selection_table().rows.size(), rows);
}

}  // namespace
}  // namespace weft
