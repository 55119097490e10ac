// Plans from algorithms/ compiled for the runtime, and the emulator check every plan passes
// before upload: the hand-built plans and the compiled rings and all-pairs pass; a plan that
// writes a buffer its collective does not own, or computes a wrong result, is refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "plan/hand_built.hpp"
#include "exec/plan_lowering.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection.hpp"
#include "ir/plan_json.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

void check(Collective c, int R, const std::string& algo, bool in_place, int instances = 2, int root = 0) {
  Plan p = make_plan(c, R, algo, "Simple", instances, in_place, root);
  LoweredPlan lp = lower_plan(p, R, 64);
  check_plan_on_emulator(lp, 2);
}

TEST(PlanSource, EveryBuiltinPassesTheEmulatorCheck) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::Broadcast, Collective::Reduce})
    for (const std::string& algo : hand_built_algorithms(c))
      for (int R : {1, 2, 3, 4})
        for (bool in_place : {false, true}) EXPECT_NO_THROW(check(c, R, algo, in_place, 2, R - 1)) << algo << " R=" << R;
}

TEST(PlanSource, CompiledRingsAndAllPairsRun) {
  const std::pair<Collective, const char*> algos[] = {
      {Collective::AllReduce, "ring_allreduce"},         {Collective::AllGather, "ring_allgather"},
      {Collective::ReduceScatter, "ring_reducescatter"}, {Collective::AllReduce, "allpairs_allreduce"},
      {Collective::AllGather, "allpairs_allgather"},     {Collective::ReduceScatter, "allpairs_reducescatter"},
      {Collective::Broadcast, "chain_broadcast"},        {Collective::AllToAll, "alltoall_direct"}};
  for (const auto& [c, name] : algos)
    for (int R : {2, 3, 4}) {
      EXPECT_EQ(algorithm_collective(name, R), c) << name;
      EXPECT_NO_THROW(check(c, R, name, false)) << name << " R=" << R;
      if (c != Collective::AllToAll) {
        EXPECT_NO_THROW(check(c, R, name, true)) << name << " R=" << R << " in place";
      }
    }
}

// HM AllReduce and AllGather as the 4- and 8-GPU rounds run them: one node of all the ranks
// (GPUPerNode = nRanks, the default) and logical nodes of WEFT_GPUS_PER_NODE GPUs.
TEST(PlanSource, HierarchicalAlgorithmsRunForEveryNodeShape) {
  const std::pair<Collective, const char*> algos[] = {{Collective::AllReduce, "hm_allreduce"},
                                                      {Collective::AllGather, "hm_allgather"}};
  const std::pair<int, int> shapes[] = {{4, 0}, {4, 2}, {4, 4}, {8, 4}, {8, 2}, {6, 3}};
  for (const auto& [R, g] : shapes) {
    setenv("WEFT_GPUS_PER_NODE", std::to_string(g).c_str(), 1);
    for (const auto& [c, name] : algos)
      for (bool in_place : {false, true}) EXPECT_NO_THROW(check(c, R, name, in_place, 2)) << name << " R=" << R << " G=" << g;
  }
  unsetenv("WEFT_GPUS_PER_NODE");
}

// What the 4-GPU round asks of the compiled plans: every instance count and protocol the
// selection table picks, lowered into the runtime's 32 connections per pair, FIFO depth 4.
TEST(PlanSource, RoundShapesFitTheRuntimesConnections) {
  const std::pair<Collective, const char*> algos[] = {{Collective::AllReduce, "hm_allreduce"},
                                                      {Collective::AllGather, "hm_allgather"},
                                                      {Collective::AllReduce, "ring_allreduce"},
                                                      {Collective::AllGather, "ring_allgather"}};
  const std::pair<const char*, int> choices[] = {{"LL", 1}, {"LL", 4}, {"LL", 16}, {"Simple", 4}, {"Simple", 8}, {"Simple", 24}};
  for (int g : {0, 2}) {
    setenv("WEFT_GPUS_PER_NODE", std::to_string(g).c_str(), 1);
    for (const auto& [c, name] : algos)
      for (const auto& [proto, inst] : choices) {
        try {
          Plan p = make_plan(c, 4, name, proto, inst, false, 0);
          check_plan_on_emulator(lower_plan(p, 4, 32), 4);
        } catch (const Error& e) {
          ADD_FAILURE() << name << " G=" << g << " " << proto << " x" << inst << ": " << e.what();
        }
      }
  }
  unsetenv("WEFT_GPUS_PER_NODE");
}

TEST(PlanSource, GpusPerNodeThatDoesNotDivideIsAnError) {
  setenv("WEFT_GPUS_PER_NODE", "3", 1);
  try {
    make_plan(Collective::AllReduce, 4, "hm_allreduce", "Simple", 1, false, 0);
    ADD_FAILURE() << "GPUPerNode 3 accepted for 4 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_GPUS_PER_NODE=3 does not divide"), std::string::npos) << e.what();
  }
  unsetenv("WEFT_GPUS_PER_NODE");
}

// The compiled plan's deadlock check runs at the communicator's FIFO depth (the runtime
// passes WEFT_FIFO_DEPTH), not at a fixed 4: the depth given reaches the check.
TEST(PlanSource, TheDeadlockCheckUsesTheGivenFifoDepth) {
  for (int depth : {2, 4, 64}) EXPECT_NO_THROW(make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 1, false, 0, depth));
  try {
    make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 1, false, 0, -1);
    ADD_FAILURE() << "FIFO depth -1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO depth"), std::string::npos) << e.what();
  }
}

// A count that would need more micro-batches than the kernel counts (2^32) is an error, not
// a wrapped count that moves part of the data.
TEST(PlanSource, MicroBatchCountsThatDoNotFitAreAnError) {
  LoweredPlan lp = lower_plan(hand_built_plan(Collective::AllReduce, 2, HandBuiltSpec{"ring", 1, false, 0, "Simple"}), 2, 4);
  EXPECT_NO_THROW(make_geometry(lp, uint64_t(1) << 30, 1, 64));
  try {
    make_geometry(lp, uint64_t(1) << 42, 1, 64);
    ADD_FAILURE() << "2^42 one-byte elements in 64-byte slots accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("more than 2^32"), std::string::npos) << e.what();
  }
}

TEST(PlanSource, WrongCollectiveOrRootIsAnError) {
  EXPECT_THROW(make_plan(Collective::AllGather, 2, "ring_allreduce", "Simple", 1, false, 0), Error);
  EXPECT_THROW(make_plan(Collective::Broadcast, 2, "chain_broadcast", "Simple", 1, false, 5), Error);
  EXPECT_THROW(make_plan(Collective::AllReduce, 2, "no_such_algorithm", "Simple", 1, false, 0), Error);
}

TEST(PlanSource, APlanThatWritesANonRootReceiveBufferIsRefused) {
  // Built-in Reduce with one slot changed to store the incoming data on rank 1 too.
  Plan p = hand_built_plan(Collective::Reduce, 2, HandBuiltSpec{"allpairs", 1, false, 0, "Simple"});
  Slot& s = p.ranks[1].tbs[0].slots[0];
  ASSERT_EQ(s.primitive, Primitive::Send);
  ThreadBlock extra;
  Slot copy;
  copy.primitive = Primitive::Copy;
  copy.src = {Buffer::Input, 0};
  copy.dst = {Buffer::Output, 0};
  extra.slots.push_back(copy);
  p.ranks[1].tbs.push_back(extra);
  try {
    check_plan_on_emulator(lower_plan(p, 2, 8), 2);
    FAIL() << "stray write accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("untouched"), std::string::npos) << e.what();
  }
}

// A chunk-DSL built-in as the runtime's algorithm: WEFT_ALGO=AllReduce:dsl:ring_allreduce.
TEST(PlanSource, ChunkDslBuiltinsRun) {
  setenv("WEFT_ALGO", "AllReduce:dsl:ring_allreduce", 1);
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 1 << 20, 3, 32).algorithm, "dsl:ring_allreduce");
  unsetenv("WEFT_ALGO");
  for (bool in_place : {false, true}) EXPECT_NO_THROW(check(Collective::AllReduce, 3, "dsl:ring_allreduce", in_place));
}

// WEFT_ALGO=plan.json: a plan file (what `weft compile -o` writes) runs as it was written,
// for the collective it implements, when its rank count, root and buffers match the call.
TEST(PlanSource, WeftAlgoRunsAPlanFile) {
  const std::string path = testing::TempDir() + "weft_plan_source_ring4.json";
  const Plan written = make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 2, false, 0);
  save_plan(written, path);
  EXPECT_EQ(algorithm_collective(path, 4), Collective::AllReduce);
  setenv("WEFT_ALGO", path.c_str(), 1);
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 1 << 20, 4, 32).algorithm, path);
  EXPECT_NE(select_algorithm(Collective::AllGather, 1 << 20, 4, 32).algorithm, path);  // not its collective
  setenv("WEFT_ALGO", ("AllReduce:" + path).c_str(), 1);
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 1 << 20, 4, 32).algorithm, path);
  unsetenv("WEFT_ALGO");
  // The selection's protocol and instances do not reshape a plan file.
  for (const char* proto : {"Simple", "LL"}) {
    Plan p = make_plan(Collective::AllReduce, 4, path, proto, 7, false, 0);
    EXPECT_TRUE(p == written);
    EXPECT_NO_THROW(check_plan_on_emulator(lower_plan(p, 4, 32), 4));
  }
  auto refused = [&](Collective c, int R, bool in_place, const std::string& want) {
    try {
      make_plan(c, R, path, "Simple", 2, in_place, 0);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(Collective::AllReduce, 3, false, "plan file '" + path + "' is for 4 ranks, the communicator has 3");
  refused(Collective::AllGather, 4, false, "plan file '" + path + "' implements AllReduce, not AllGather");
  refused(Collective::AllReduce, 4, true, "plan file '" + path + "' was compiled only for out-of-place buffers");
  // A plan that can deadlock at the communicator's FIFO depth is refused before upload.
  try {
    make_plan(Collective::AllReduce, 4, path, "Simple", 2, false, 0, -1);
    ADD_FAILURE() << "FIFO depth -1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO depth"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  try {
    make_plan(Collective::AllReduce, 4, path, "Simple", 2, false, 0);
    ADD_FAILURE() << "missing plan file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
