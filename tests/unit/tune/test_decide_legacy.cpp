// decide() against the rule it replaced (old_rule.hpp), call for call: every collective,
// 1 to 16 ranks, sizes from 0 to 1 GiB, in and out of place, one node and several, under
// the default table and one exercising every field a row has, with and without each
// environment override. Same algorithm, protocol, instances, executor, micro-batch and
// fallback, or the same error.
#include <gtest/gtest.h>

#include <vector>

#include "old_rule.hpp"
#include "tune/decide.hpp"

namespace weft {
namespace {

const Collective kCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                   Collective::AllToAll,  Collective::Broadcast, Collective::Reduce};

std::vector<uint64_t> sizes() {
  std::vector<uint64_t> s = {0, 1, 3};
  for (int k = 3; k <= 30; ++k) {
    s.push_back(1ull << k);
    s.push_back((1ull << k) + 8);
    if (k % 3 == 0) s.push_back((1ull << k) - 1);
  }
  for (uint64_t b : {786431ull, 786432ull, 2097151ull, 12345677ull}) s.push_back(b);
  return s;
}

// A table with every kind of row: ce, oneshot, compiled sources under several schedulers and
// allocators, hand-built plans, LL128, micro-batches, executors, placement, and calls no row
// matches (AllReduce of at most 4 KiB on 9 ranks or more).
const char* kCustomTable = R"({"format": "weft-selection", "version": 1, "rows": [
  {"collectives": ["AllGather", "AllReduce"], "ranks": [2, 4], "bytes": [1048576, null], "algorithm": "ce",
   "protocol": "Simple", "instances": 1},
  {"collectives": ["AllReduce"], "bytes": [0, 4096], "algorithm": "oneshot", "protocol": "LL", "instances": "kernel"},
  {"collectives": ["AllReduce"], "bytes": [4097, 65536], "algorithm": "ring_allreduce", "scheduler": "hpds",
   "protocol": "LL128", "instances": {"per_bytes": 4096, "min": 2, "max": 40}, "executor": "gen"},
  {"collectives": ["AllReduce"], "bytes": [65537, null], "algorithm": "ring_allreduce", "scheduler": "algo",
   "allocator": "conn", "protocol": "LL", "instances": 48, "microbatch_bytes": 65536, "executor": "interp"},
  {"collectives": ["AllGather"], "placement": "in", "algorithm": "ring", "protocol": "LL",
   "instances": {"per_bytes": 8192, "min": 1, "max": 16}, "executor": "gen"},
  {"collectives": ["AllGather", "ReduceScatter", "AllToAll"], "algorithm": "allpairs", "protocol": "LL128", "instances": 3},
  {"collectives": ["Broadcast", "Reduce"], "algorithm": "chain", "scheduler": "algo", "protocol": "Simple", "instances": 2,
   "executor": "gen"}
]})";

struct Case {
  const char* name;
  old_rule::Env env;
  int connections = 32;
  uint64_t slot = 512 << 10;
};

old_rule::Env env(std::string algo, std::string proto = "", int64_t instances = 0, int64_t microbatch = 0, bool gen = false) {
  old_rule::Env e;
  e.algo = std::move(algo);
  e.proto = std::move(proto);
  e.instances = instances;
  e.microbatch = microbatch;
  e.gen = gen;
  return e;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](const char* name, old_rule::Env e, int connections = 32, uint64_t slot = 512 << 10) {
    v.push_back(Case{name, std::move(e), connections, slot});
  };
  add("no overrides", env(""));
  add("WEFT_ALGO=ring", env("ring"));
  add("WEFT_ALGO=oneshot WEFT_PROTO=Simple", env("oneshot", "Simple"));
  add("WEFT_PROTO=LL128", env("", "LL128"));
  add("WEFT_PROTO=LL128, unaligned slots", env("", "LL128"), 32, 65552);
  add("WEFT_INSTANCES=99", env("", "", 99));
  add("WEFT_ALGO mixed", env("AllReduce:ring,chain,AllGather:ce,ring_allgather,ReduceScatter:oneshot"));
  add("WEFT_ALGO=ce WEFT_INSTANCES=3, 4 connections", env("ce", "", 3), 4);
  add("WEFT_PROTO=LL WEFT_ALGO=oneshot,Reduce:chain", env("oneshot,Reduce:chain", "LL"));
  add("WEFT_MICROBATCH_BYTES=65536", env("", "", 0, 65536));
  add("WEFT_EXECUTOR=gen", env("", "", 0, 0, true));
  add("WEFT_EXECUTOR=gen WEFT_ALGO=AllReduce:ring_allreduce", env("AllReduce:ring_allreduce", "", 0, 0, true));
  add("WEFT_ALGO=AllToAll:ring,Broadcast:oneshot,Reduce:ce", env("AllToAll:ring,Broadcast:oneshot,Reduce:ce"));
  add("WEFT_ALGO=ring_allreduce,ring_reducescatter WEFT_INSTANCES=5", env("ring_allreduce,ring_reducescatter", "", 5));
  add("WEFT_PROTO=LL64 (an error)", env("", "LL64"));
  add("WEFT_ALGO=Allsum:ring (an error)", env("Allsum:ring"));
  return v;
}

/// decide()'s launch in the old rule's terms, for the comparison.
old_rule::Launch as_old(const Launch& l) {
  old_rule::Launch o;
  o.ch = to_choice(l);
  o.gen = l.executor == algo::Executor::Generated;
  o.mb = l.executor == algo::Executor::OneShot || l.executor == algo::Executor::CopyEngine ? 0 : l.microbatch_bytes;
  return o;
}

std::string text_of(const old_rule::Launch& l, bool plan) {
  const Choice& c = l.ch;
  std::string s = c.algorithm + " " + c.protocol + " x" + std::to_string(c.instances);
  if (!plan) return s;
  // A hand-built plan takes no scheduler or allocator (the old choice carried the row's).
  if (!algo::is_hand_built(c.algorithm)) s += " " + c.scheduler + "/" + c.allocator;
  return s + (l.gen ? " gen" : " interp") + " mb " + std::to_string(l.mb);
}

std::string old_text(const old_rule::Result& r) {
  const bool plan = r.run.ch.algorithm != "oneshot" && r.run.ch.algorithm != "ce";
  std::string s = text_of(r.run, plan);
  if (r.has_fallback) s += " | else " + text_of(r.fallback, true);
  return s;
}

std::string new_text(const Decision& d) {
  const bool plan = d.executor == algo::Executor::Interpreter || d.executor == algo::Executor::Generated;
  std::string s = text_of(as_old(d), plan);
  if (d.executor == algo::Executor::CopyEngine) s += " | else " + text_of(as_old(d.fallback), true);
  return s;
}

void compare_over_grid(const SelectionTable& table, const char* table_name) {
  const auto shared = std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &table);
  const std::vector<uint64_t> sz = sizes();
  size_t calls = 0, errors = 0;
  for (const Case& k : cases()) {
    DecideEnv env;
    env.algo = k.env.algo;
    env.proto = k.env.proto;
    env.instances = k.env.instances;
    env.microbatch = k.env.microbatch;
    env.generated = k.env.gen;
    for (int R = 1; R <= 16; ++R)
      for (bool net : {false, true}) {
        CommShape shape;
        shape.nranks = R;
        shape.multi_node = net;
        shape.connections = k.connections;
        shape.slot_bytes = k.slot;
        const Decider decider(shared, shape, env);
        const old_rule::Shape os{R, net, k.connections, k.slot, 64 << 10};
        for (Collective c : kCollectives)
          for (uint64_t b : sz)
            for (bool in_place : {false, true}) {
              std::string want, got;
              try {
                want = old_text(old_rule::per_call(table, os, k.env, c, b, in_place));
              } catch (const Error& e) {
                want = std::string("error: ") + e.what();
              }
              try {
                got = new_text(decider.decide(Call{c, b, in_place}));
              } catch (const Error& e) {
                got = std::string("error: ") + e.what();
              }
              ++calls;
              if (want.rfind("error: ", 0) == 0) {
                ++errors;
                // The old rule's "no row" is terse; decide() names the table.
                if (want == "error: no row") {
                  EXPECT_NE(got.find("has no row for"), std::string::npos) << got;
                  continue;
                }
              }
              ASSERT_EQ(got, want) << table_name << ", " << k.name << ": " << to_string(c) << " of " << b << " B on " << R
                                   << " ranks, " << (in_place ? "in place" : "out of place")
                                   << (net ? ", across nodes" : ", one node");
            }
      }
  }
  EXPECT_GT(calls, 100000u);
  EXPECT_LT(errors, calls / 4) << "most calls must be decided, not refused";
}

TEST(DecideLegacy, DefaultTableDecidesAsTheOldRuleDid) {
  compare_over_grid(default_selection_table(), "the default table");
}

TEST(DecideLegacy, EveryKindOfRowDecidesAsTheOldRuleDid) {
  const SelectionTable t = parse_selection_table(kCustomTable, "custom.json");
  compare_over_grid(t, "custom.json");
}

}  // namespace
}  // namespace weft
