// The built-in selection table: protocol and instances by size, overrides, bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "exec/oneshot.hpp"
#include "plan/hand_built.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

TEST(Selection, SmallIsOneShotMidIsAllPairsOverLLLargeIsSimple) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    Choice s = table_choice(c, 8, 2);
    EXPECT_EQ(s.protocol, "LL");
    EXPECT_EQ(s.algorithm, kOneShot);
    EXPECT_EQ(s.instances, 1);
    Choice m = table_choice(c, 256u << 10, 9);  // more ranks than the one-shot kernel takes
    EXPECT_EQ(m.protocol, "Simple");
    EXPECT_NE(m.algorithm, kOneShot);
    Choice ll = table_choice(c, 8, 9);
    EXPECT_EQ(ll.protocol, "LL");
    // AllReduce and ReduceScatter keep the hand-built all-pairs; AllGather's is compiled.
    EXPECT_EQ(ll.algorithm, c == Collective::AllGather ? "peerwise_allgather" : "allpairs");
    Choice l = table_choice(c, 256u << 20, 2);
    EXPECT_EQ(l.protocol, "Simple");
    EXPECT_EQ(l.instances, 24);
    Choice ring = table_choice(c, 256u << 20, 8);
    EXPECT_EQ(ring.algorithm, c == Collective::AllReduce   ? "ring_allreduce"
                              : c == Collective::AllGather ? "ring_allgather"
                                                           : "ring_reducescatter");
    EXPECT_EQ(ring.scheduler, "algo");
  }
}

TEST(Selection, EveryChoiceIsAPrimitiveOrAnAlgorithmOfItsCollective) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::Broadcast, Collective::Reduce})
    for (int R : {2, 3, 4, 8})
      for (uint64_t b = 1; b <= (1ull << 32); b *= 4)
        for (bool in_place : {false, true}) {
          Choice ch = table_choice(c, b, R, in_place);
          if (ch.algorithm == kOneShot) {
            // The kernel, not a plan: only where it fits, with blocks it has regions for.
            EXPECT_TRUE(oneshot_fits(c, b, R)) << b;
            EXPECT_EQ(ch.protocol, "LL");
            EXPECT_GE(ch.instances, 1);
            EXPECT_LE(ch.instances, exec::kOneShotBlocks);
            continue;
          }
          auto names = hand_built_algorithms(c);
          if (is_hand_built_name(ch.algorithm))
            EXPECT_NE(std::find(names.begin(), names.end(), ch.algorithm), names.end()) << ch.algorithm;
          else
            EXPECT_EQ(algorithm_collective(ch.algorithm, R), c) << ch.algorithm;  // compiled from algorithms/
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
  setenv("WEFT_ALGO", "chain", 1);  // not an AllReduce algorithm: ignored; Simple sends the table's oneshot to a plan
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 8, 2, 32).algorithm, "allpairs");
  setenv("WEFT_PROTO", "LL64", 1);
  EXPECT_THROW(select_algorithm(Collective::AllReduce, 8, 2, 32), Error);
  // LL128 is forced on the plans, and sends the table's oneshot (LL by nature) to its plan
  // as Simple does.
  setenv("WEFT_PROTO", "LL128", 1);
  ch = select_algorithm(Collective::AllReduce, 8, 2, 32);
  EXPECT_NE(ch.algorithm, kOneShot);
  EXPECT_EQ(ch.protocol, "LL128");
  setenv("WEFT_ALGO", "ring", 1);
  ch = select_algorithm(Collective::AllReduce, 1 << 20, 2, 32);
  EXPECT_EQ(ch.protocol, "LL128");
  EXPECT_EQ(ch.algorithm, "ring");
  unsetenv("WEFT_ALGO");
  ch = select_algorithm(Collective::AllGather, 64 << 20, 4, 32);
  EXPECT_EQ(ch.protocol, "LL128");
  unsetenv("WEFT_PROTO");
  unsetenv("WEFT_INSTANCES");
  unsetenv("WEFT_ALGO");
}

// Across the network (emulated nodes) only Simple runs; LL128 also needs 128-byte slots.
TEST(Selection, LL128FallsBackToSimpleAcrossTheNetworkAndOnUnalignedSlots) {
  std::string why;
  EXPECT_EQ(effective_protocol("LL128", false, 512 << 10, 64 << 10, &why), "LL128");
  EXPECT_EQ(why, "");
  EXPECT_EQ(effective_protocol("LL", false, 512 << 10, 64 << 10, &why), "LL");
  EXPECT_EQ(effective_protocol("Simple", true, 512 << 10, 64 << 10, &why), "Simple");
  EXPECT_EQ(why, "");
  EXPECT_EQ(effective_protocol("LL128", true, 512 << 10, 64 << 10, &why), "Simple");
  EXPECT_NE(why.find("LL128 runs as Simple across the network"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(effective_protocol("LL", true, 512 << 10, 64 << 10, &why), "Simple");
  EXPECT_NE(why.find("LL runs as Simple across the network"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(effective_protocol("LL128", false, 65552, 64 << 10, &why), "Simple");
  EXPECT_NE(why.find("WEFT_SLOT_BYTES (65552)"), std::string::npos) << why;
  EXPECT_EQ(effective_protocol("LL128", false, 512 << 10, 65552), "Simple");
  EXPECT_EQ(effective_protocol("LL", false, 65552, 65552), "LL");  // LL packets need 16-byte alignment only
}

TEST(Selection, OneShotOverridesAndLimits) {
  // Named explicitly it wins over a forced Simple, where it fits.
  setenv("WEFT_ALGO", "oneshot", 1);
  setenv("WEFT_PROTO", "Simple", 1);
  Choice ch = select_algorithm(Collective::AllReduce, 8, 2, 32);
  EXPECT_EQ(ch.algorithm, kOneShot);
  EXPECT_EQ(ch.protocol, "LL");
  // Past what its regions hold, or past 8 ranks, the table's plan runs.
  ch = select_algorithm(Collective::AllReduce, exec::kOneShotMaxBytes + 8, 2, 32);
  EXPECT_EQ(ch.algorithm, "allpairs");
  EXPECT_EQ(ch.protocol, "Simple");
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 8, 9, 32).algorithm, "allpairs");
  // Bare, it does not name the kernel for Broadcast: ignored there (on 3 ranks the table's
  // plan; on 2 the table's own row takes the kernel, below).
  unsetenv("WEFT_PROTO");
  EXPECT_EQ(select_algorithm(Collective::Broadcast, 8, 3, 32).algorithm, "direct_broadcast");
  // ReduceScatter's payload is per rank and peer times the rank count.
  EXPECT_EQ(select_algorithm(Collective::ReduceScatter, 2 * exec::kOneShotMaxBytes, 2, 32).algorithm, kOneShot);
  EXPECT_NE(select_algorithm(Collective::ReduceScatter, 2 * exec::kOneShotMaxBytes + 16, 2, 32).algorithm, kOneShot);
  // Another algorithm named: the plan's protocol and instances, not the kernel's.
  setenv("WEFT_ALGO", "AllReduce:ring", 1);
  ch = select_algorithm(Collective::AllReduce, 64 << 10, 2, 32);
  EXPECT_EQ(ch.algorithm, "ring");
  EXPECT_EQ(ch.protocol, "LL");
  EXPECT_EQ(ch.instances, 8);  // one per 8 KiB
  unsetenv("WEFT_ALGO");
  // Forced Simple without naming it: the table's plan (on two ranks, AllGather's is the
  // compiled all-pairs, the hand-built one's equal).
  setenv("WEFT_PROTO", "Simple", 1);
  ch = select_algorithm(Collective::AllGather, 64, 2, 32);
  EXPECT_EQ(ch.algorithm, "allpairs_allgather");
  EXPECT_EQ(ch.protocol, "Simple");
  unsetenv("WEFT_PROTO");
}

TEST(Selection, OneShotWhileEachRankSendsAtMostHalfAMebibyteOrOneForAllReduceOnThreeToEight) {
  const uint64_t K = 1024;
  // On 2 ranks AllReduce, AllGather, ReduceScatter (and AllToAll out of place) while each rank
  // sends at most 1 MiB (measured there, session 9).
  EXPECT_EQ(table_choice(Collective::AllReduce, 1024 * K, 2).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllReduce, 1024 * K + 8, 2).algorithm, kOneShot);
  EXPECT_EQ(table_choice(Collective::AllToAll, 2048 * K, 2).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllToAll, 2048 * K + 16, 2).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllToAll, 64, 3).algorithm, kOneShot);
  // AllReduce on 3 to 8 ranks: while each rank sends at most 1 MiB (its row's sent_bytes).
  EXPECT_EQ(table_choice(Collective::AllReduce, 256 * K, 5).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllReduce, 256 * K + 8, 5).algorithm, kOneShot);
  EXPECT_EQ(table_choice(Collective::AllReduce, 256 * K, 4).algorithm, kOneShot);
  EXPECT_EQ(table_choice(Collective::AllReduce, 128 * K, 8).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllReduce, 160 * K, 8).algorithm, kOneShot);
  // AllGather's payload is the whole output: R parts of which R - 1 travel.
  EXPECT_EQ(table_choice(Collective::AllGather, 2048 * K, 2).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllGather, 2048 * K + 16, 2).algorithm, kOneShot);
  EXPECT_EQ(table_choice(Collective::AllGather, 3 * 256 * K, 3).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::AllGather, 3 * 256 * K + 24, 3).algorithm, kOneShot);
  EXPECT_EQ(table_choice(Collective::ReduceScatter, 8 * 64 * K, 8).algorithm, kOneShot);
  EXPECT_NE(table_choice(Collective::ReduceScatter, 8 * 80 * K, 8).algorithm, kOneShot);
  // Broadcast and Reduce on 2 ranks (measured there), their whole payload up to 512 KiB.
  for (Collective c : {Collective::Broadcast, Collective::Reduce}) {
    EXPECT_EQ(table_choice(c, 8, 2).algorithm, kOneShot);
    EXPECT_EQ(table_choice(c, 512 * K, 2).algorithm, kOneShot);
    EXPECT_NE(table_choice(c, 512 * K + 8, 2).algorithm, kOneShot);
    EXPECT_NE(table_choice(c, 8, 3).algorithm, kOneShot);
  }
}

TEST(Selection, OneShotBlocksCoverThePayload) {
  const uint64_t per_block = static_cast<uint64_t>(exec::kOneShotThreads) * exec::kOneShotWordsPerThread * 8;
  for (uint64_t b : {uint64_t{1}, uint64_t{8}, uint64_t{4096}, uint64_t{65536}, uint64_t{65544}, uint64_t{262144}, exec::kOneShotMaxBytes}) {
    int n = oneshot_blocks(b);
    EXPECT_GE(n, 1);
    EXPECT_LE(n, exec::kOneShotBlocks);
    EXPECT_GE(static_cast<uint64_t>(n) * per_block, b) << b;
  }
  EXPECT_EQ(oneshot_blocks(8), 1);
  EXPECT_EQ(oneshot_blocks(64 << 10), 16);
}

}  // namespace
}  // namespace weft
