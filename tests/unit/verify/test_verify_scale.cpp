// The verifier at the scale the compiler needs: HM AllReduce on 1,024 ranks (128 nodes of
// 8 GPUs, the a100-128x8 shape): about two million transfers and 1,024 chunks per rank.
// Timing is printed by `weft verify` and recorded in docs/verify.md; this test only checks
// the result and that the state stays small.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/verify.hpp"

namespace weft {
namespace {

/// Built once and shared by the tests below (each copies what it changes).
const Algorithm& hm1024() {
  static const Algorithm a = test::hm_allreduce(128, 8);
  return a;
}

TEST(VerifyScale, HierarchicalAllReduceAt1024Ranks) {
  const Algorithm& a = hm1024();
  ASSERT_EQ(a.transfers.size(), size_t(2 * 1024 * 128 * 7 + 2 * 1024 * 127));
  VerifyResult r = verify(a);
  EXPECT_TRUE(r.ok) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_LT(r.peak_state_bytes, uint64_t{512} << 20);
}

TEST(VerifyScale, BrokenAt1024RanksFailsQuicklyWithFewMessages) {
  // Drop rank 1023's last intra-node AllGather sends: its seven peers (ranks 1016-1022) each
  // keep their own stale copy of chunk 15.
  Algorithm a = hm1024();
  a.transfers.resize(a.transfers.size() - 7);
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.errors.size(), 7u);
  EXPECT_EQ(r.error_count, 7u);
  EXPECT_NE(r.errors[0].find("at the end, rank 1016's output chunk 15 holds 1 contribution, 1 of the 1024 expected; missing rank 0's input chunk 15"), std::string::npos) << r.errors[0];
}

TEST(VerifyScale, ManyWrongSlotsAreCountedNotWorded) {
  // Without its whole AllGather half every slot but one per rank is wrong: a million
  // errors, ten worded.
  Algorithm a = hm1024();
  a.transfers.resize(a.transfers.size() / 2);
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.errors.size(), 10u);
  EXPECT_EQ(r.error_count, size_t(1024) * 1023);
}

}  // namespace
}  // namespace weft
