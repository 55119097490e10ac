// The built-in selection table: protocol and instances by size, overrides, bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/builtin_plans.hpp"
#include "runtime/selection.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

TEST(Selection, SmallIsAllPairsOverLLLargeIsSimple) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    Choice s = table_choice(c, 8, 2);
    EXPECT_EQ(s.protocol, "LL");
    EXPECT_EQ(s.algorithm, "allpairs");
    EXPECT_EQ(s.instances, 1);
    Choice l = table_choice(c, 256u << 20, 2);
    EXPECT_EQ(l.protocol, "Simple");
    EXPECT_EQ(l.instances, 24);
    EXPECT_EQ(table_choice(c, 256u << 20, 8).algorithm, "ring");
  }
}

TEST(Selection, EveryChoiceIsABuiltinOfItsCollective) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::Broadcast, Collective::Reduce})
    for (int R : {2, 3, 8})
      for (uint64_t b = 1; b <= (1ull << 32); b *= 4) {
        Choice ch = table_choice(c, b, R);
        auto names = builtin_plan_algorithms(c);
        EXPECT_NE(std::find(names.begin(), names.end(), ch.algorithm), names.end()) << ch.algorithm;
        EXPECT_GE(ch.instances, 1);
        EXPECT_LE(ch.instances, 24);
      }
}

TEST(Selection, EnvironmentOverridesAndClamps) {
  setenv("WEFT_PROTO", "Simple", 1);
  setenv("WEFT_INSTANCES", "99", 1);
  setenv("WEFT_ALGO", "ring", 1);
  Choice ch = select_algorithm(Collective::AllReduce, 8, 2, 32);
  EXPECT_EQ(ch.protocol, "Simple");
  EXPECT_EQ(ch.instances, 32);
  EXPECT_EQ(ch.algorithm, "ring");
  setenv("WEFT_ALGO", "chain", 1);  // not an AllReduce algorithm: ignored
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 8, 2, 32).algorithm, "allpairs");
  setenv("WEFT_PROTO", "LL64", 1);
  EXPECT_THROW(select_algorithm(Collective::AllReduce, 8, 2, 32), Error);
  unsetenv("WEFT_PROTO");
  unsetenv("WEFT_INSTANCES");
  unsetenv("WEFT_ALGO");
}

}  // namespace
}  // namespace weft
