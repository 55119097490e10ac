// Memory-window registration's verdict (runtime/window_rules.hpp), the direct copy-engine
// call's tag (plan/ce_plan.hpp) and the CTA policies' rules (tune/cta_policy.hpp), without a
// GPU: what every rank decides from the same records, and the policy syntax of
// NCCL_CTA_POLICY / WEFT_CTA_POLICY. decide()'s window and policy rules: tests/unit/tune.
#include <gtest/gtest.h>

#include <set>

#include "plan/ce_plan.hpp"
#include "runtime/window_rules.hpp"
#include "tune/cta_policy.hpp"
#include "util/error.hpp"

using namespace weft;

namespace {

std::vector<WindowClaim> claims(int n, int flags, uint64_t bytes) {
  return std::vector<WindowClaim>(static_cast<size_t>(n), WindowClaim{WindowRefusal::None, flags, 3, bytes, true});
}

}  // namespace

TEST(WindowRules, AgreeingRanksRegisterAndMapWhenEveryBufferIsShareable) {
  WindowVerdict v = judge_window(claims(4, kWinSymmetric, 1 << 20), true);
  EXPECT_EQ(v.code, ErrorCode::Success);
  EXPECT_TRUE(v.map);
  // Default windows may differ in size.
  auto c = claims(2, kWinDefault, 4096);
  c[1].bytes = 8192;
  v = judge_window(c, true);
  EXPECT_EQ(v.code, ErrorCode::Success);
  EXPECT_TRUE(v.map);
  // One buffer without an IPC handle, or a communicator whose peers cannot be mapped: registered, not mapped.
  c[1].shareable = false;
  EXPECT_FALSE(judge_window(c, true).map);
  EXPECT_FALSE(judge_window(claims(2, kWinDefault, 64), false).map);
  EXPECT_FALSE(judge_window(claims(1, kWinSymmetric, 64), true).map);  // one rank: nothing to map
}

TEST(WindowRules, OneRanksBadArgumentsFailEveryRankNamingIt) {
  auto c = claims(3, kWinSymmetric, 4096);
  c[2].refusal = WindowRefusal::NotDevice;
  WindowVerdict v = judge_window(c, true);
  EXPECT_EQ(v.code, ErrorCode::InvalidArgument);
  EXPECT_NE(v.message.find("rank 2 refused its arguments"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("not device memory"), std::string::npos) << v.message;
  for (WindowRefusal r : {WindowRefusal::NullOrEmpty, WindowRefusal::BadFlags, WindowRefusal::PastAllocation}) {
    c[2].refusal = r;
    EXPECT_NE(judge_window(c, true).message.find(refusal_text(r)), std::string::npos);
  }
}

TEST(WindowRules, DisagreeingRanksFailEveryRank) {
  auto c = claims(3, kWinSymmetric, 4096);
  c[1].bytes = 8192;
  WindowVerdict v = judge_window(c, true);
  EXPECT_EQ(v.code, ErrorCode::InvalidUsage);
  EXPECT_NE(v.message.find("rank 0 passed 4096 bytes, rank 1 8192"), std::string::npos) << v.message;
  c = claims(3, kWinSymmetric, 4096);
  c[2].flags = kWinDefault;
  v = judge_window(c, true);
  EXPECT_EQ(v.code, ErrorCode::InvalidUsage);
  EXPECT_NE(v.message.find("winFlags"), std::string::npos) << v.message;
  c = claims(3, kWinDefault, 4096);
  c[1].seq = 4;
  v = judge_window(c, true);
  EXPECT_EQ(v.code, ErrorCode::InvalidUsage);
  EXPECT_NE(v.message.find("in the same order"), std::string::npos) << v.message;
}

TEST(WindowRules, CallTagsTellCallsApart) {
  std::set<uint64_t> tags;
  for (int c = 0; c < 5; ++c)
    for (uint64_t off : {0ull, 4096ull})
      for (uint64_t bytes : {64ull, 128ull})
        for (int root : {0, 1}) {
          const uint64_t t = ce::call_tag(c, 7, off, bytes, root);
          EXPECT_NE(t, 0u);
          tags.insert(t);
        }
  EXPECT_EQ(tags.size(), 5u * 2 * 2 * 2);
  EXPECT_EQ(ce::call_tag(0, 1, 2, 3, 0), ce::call_tag(0, 1, 2, 3, 0));
  EXPECT_NE(ce::call_tag(0, 1, 2, 3, 0), ce::call_tag(0, 2, 2, 3, 0));
}

TEST(CtaPolicy, ParsesNcclSyntax) {
  EXPECT_EQ(parse_cta_policy("", "X"), -1);
  EXPECT_EQ(parse_cta_policy("0", "X"), kCtaDefault);
  EXPECT_EQ(parse_cta_policy("1", "X"), kCtaEfficiency);
  EXPECT_EQ(parse_cta_policy("2", "X"), kCtaZero);
  EXPECT_EQ(parse_cta_policy("zero", "X"), kCtaZero);
  EXPECT_EQ(parse_cta_policy("Efficiency", "X"), kCtaEfficiency);
  EXPECT_EQ(parse_cta_policy("DEFAULT", "X"), kCtaDefault);
  EXPECT_EQ(parse_cta_policy("EFFICIENCY|ZERO", "X"), kCtaZero);  // zero wins
  for (const char* bad : {"3", "fast", "ZERO|", "|ZERO", "9", "zero|nope"}) {
    try {
      parse_cta_policy(bad, "NCCL_CTA_POLICY");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("NCCL_CTA_POLICY='" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(normalize_cta_policy(3, "X"), kCtaZero);
  EXPECT_THROW(normalize_cta_policy(4, "X"), Error);
  EXPECT_THROW(normalize_cta_policy(-1, "X"), Error);
  EXPECT_STREQ(cta_policy_name(kCtaEfficiency), "efficiency");
}

TEST(CtaPolicy, ZeroTakesTheMovingCollectivesOnly) {
  EXPECT_TRUE(zero_cta_collective(Collective::AllGather));
  EXPECT_TRUE(zero_cta_collective(Collective::AllToAll));
  EXPECT_TRUE(zero_cta_collective(Collective::Broadcast));
  EXPECT_FALSE(zero_cta_collective(Collective::AllReduce));
  EXPECT_FALSE(zero_cta_collective(Collective::ReduceScatter));
  EXPECT_FALSE(zero_cta_collective(Collective::Reduce));
}

TEST(CtaPolicy, EfficiencyCapsThreadBlocks) {
  EXPECT_EQ(efficiency_instances(8, 16), 8);   // within the cap: unchanged
  EXPECT_EQ(efficiency_instances(32, 64), 8);  // 2 blocks per instance: 8 instances, 16 blocks
  EXPECT_EQ(efficiency_instances(24, 72), 5);  // 3 per instance: 15 blocks
  EXPECT_EQ(efficiency_instances(4, 80), 1);   // 20 per instance: never below 1
  EXPECT_EQ(efficiency_instances(1, 200), 1);
  EXPECT_EQ(efficiency_instances(16, 17), 15);  // always fewer when over the cap
}
