// Plans from algorithms/ compiled for the runtime, and the emulator check every plan passes
// before upload: the built-in plans and the compiled rings and all-pairs pass; a plan that
// writes a buffer its collective does not own, or computes a wrong result, is refused.
#include <gtest/gtest.h>

#include "runtime/builtin_plans.hpp"
#include "runtime/plan_lowering.hpp"
#include "runtime/plan_source.hpp"
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
    for (const std::string& algo : builtin_plan_algorithms(c))
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
      if (c != Collective::AllToAll) EXPECT_NO_THROW(check(c, R, name, true)) << name << " R=" << R << " in place";
    }
}

TEST(PlanSource, WrongCollectiveOrRootIsAnError) {
  EXPECT_THROW(make_plan(Collective::AllGather, 2, "ring_allreduce", "Simple", 1, false, 0), Error);
  EXPECT_THROW(make_plan(Collective::Broadcast, 2, "chain_broadcast", "Simple", 1, false, 5), Error);
  EXPECT_THROW(make_plan(Collective::AllReduce, 2, "no_such_algorithm", "Simple", 1, false, 0), Error);
}

TEST(PlanSource, APlanThatWritesANonRootReceiveBufferIsRefused) {
  // Built-in Reduce with one slot changed to store the incoming data on rank 1 too.
  Plan p = builtin_plan(Collective::Reduce, 2, BuiltinSpec{"allpairs", 1, false, 0, "Simple"});
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

}  // namespace
}  // namespace weft
