// ncclConfig_t validation.
#include <gtest/gtest.h>

#include <cstddef>

#include "nccl/config.hpp"
#include "util/error.hpp"

using namespace weft::nccl;

namespace {

std::string error_of(const ncclConfig_t& c) {
  try {
    parse_config(&c, "ncclCommInitRankConfig");
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.code(), weft::ErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(NcclConfig, NullAndInitializerGiveDefaults) {
  CommOptions o = parse_config(nullptr, "x");
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.name, "");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  o = parse_config(&c, "x");
  EXPECT_TRUE(o.blocking);
}

TEST(NcclConfig, ReadsBlockingAndName) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.commName = "pg0";
  c.minCTAs = 2;
  c.maxCTAs = 8;
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  CommOptions o = parse_config(&c, "x");
  EXPECT_FALSE(o.blocking);
  EXPECT_EQ(o.name, "pg0");
  EXPECT_EQ(o.cta_policy, NCCL_CTA_POLICY_EFFICIENCY);
}

TEST(NcclConfig, CtaPolicyUnsetOrNormalized) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(parse_config(&c, "x").cta_policy, -1);
  EXPECT_EQ(parse_config(nullptr, "x").cta_policy, -1);
  c.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  EXPECT_EQ(parse_config(&c, "x").cta_policy, NCCL_CTA_POLICY_ZERO);
  // Both flags: zero wins, as in NCCL.
  c.CTAPolicy = NCCL_CTA_POLICY_ZERO | NCCL_CTA_POLICY_EFFICIENCY;
  EXPECT_EQ(parse_config(&c, "x").cta_policy, NCCL_CTA_POLICY_ZERO);
  c.CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  EXPECT_EQ(parse_config(&c, "x").cta_policy, NCCL_CTA_POLICY_DEFAULT);
}

TEST(NcclConfig, RejectsBadValuesWithTheField) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.magic = 0;
  EXPECT_NE(error_of(c).find("NCCL_CONFIG_INITIALIZER"), std::string::npos);
  c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 2;
  EXPECT_NE(error_of(c).find("blocking is 2"), std::string::npos);
  c = NCCL_CONFIG_INITIALIZER;
  c.minCTAs = 9;
  c.maxCTAs = 4;
  EXPECT_NE(error_of(c).find("minCTAs 9 is above maxCTAs 4"), std::string::npos);
  c = NCCL_CONFIG_INITIALIZER;
  c.maxCTAs = -1;
  EXPECT_NE(error_of(c).find("maxCTAs is -1"), std::string::npos);
  c = NCCL_CONFIG_INITIALIZER;
  c.CTAPolicy = 8;
  EXPECT_NE(error_of(c).find("CTAPolicy 8"), std::string::npos);
  c = NCCL_CONFIG_INITIALIZER;
  c.size = 8;
  EXPECT_NE(error_of(c).find("smaller than any version"), std::string::npos);
}

TEST(NcclConfig, AnOlderStructIsReadOnlyAsFarAsItGoes) {
  // A caller built against NCCL 2.14's header: the struct ends after netName. Fields past
  // it hold garbage here and must not be read.
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.size = offsetof(ncclConfig_t, netName) + sizeof(const char*);
  c.splitShare = 77;
  c.commName = reinterpret_cast<const char*>(0x1);
  c.CTAPolicy = 99;
  CommOptions o = parse_config(&c, "x");
  EXPECT_EQ(o.name, "");
  EXPECT_EQ(o.cta_policy, -1);
}
