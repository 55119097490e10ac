#include <gtest/gtest.h>

#include <cstdlib>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

TEST(Text, ParseBytes) {
  EXPECT_EQ(text::parse_bytes("1024"), 1024u);
  EXPECT_EQ(text::parse_bytes("64K"), 65536u);
  EXPECT_EQ(text::parse_bytes("1MiB"), 1u << 20);
  EXPECT_EQ(text::parse_bytes("2G"), 2ull << 30);
  EXPECT_THROW(text::parse_bytes("12Q"), Error);
  EXPECT_THROW(text::parse_bytes("K"), Error);
  // 2^64 - 1 is the largest size; more, in digits or through a unit, is a clear error.
  EXPECT_EQ(text::parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(text::parse_bytes("16777215T"), 16777215ull << 40);
  for (const char* big : {"18446744073709551616", "99999999999999999999999", "16777216T", "17179869184G"}) {
    try {
      text::parse_bytes(big);
      ADD_FAILURE() << big;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_EQ(std::string(e.what()), "byte size '" + std::string(big) + "' is too large (at most 2^64 - 1 bytes)");
    }
  }
}

TEST(Text, FormatBytes) {
  EXPECT_EQ(text::format_bytes(8), "8 B");
  EXPECT_EQ(text::format_bytes(65536), "64 KiB");
  EXPECT_EQ(text::format_bytes(1536), "1.5 KiB");
}

TEST(Text, KvList) {
  auto m = text::parse_kv_list("nRanks=1024, GPUPerNode=8");
  EXPECT_EQ(m.at("nRanks"), "1024");
  EXPECT_EQ(m.at("GPUPerNode"), "8");
  EXPECT_THROW(text::parse_kv_list("nRanks"), Error);
}

TEST(Text, TableAligns) {
  text::Table t({"size", "time"});
  t.add_row({"8", "10.5"});
  EXPECT_EQ(t.str(), "size  time\n   8  10.5\n");
}

TEST(Config, DefaultsAndOverrides) {
  unsetenv("WEFT_TIMEOUT");
  EXPECT_DOUBLE_EQ(config::get_seconds("WEFT_TIMEOUT"), 60.0);
  setenv("WEFT_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(config::get_seconds("WEFT_TIMEOUT"), 2.5);
  setenv("WEFT_TIMEOUT", "soon", 1);
  EXPECT_THROW(config::get_seconds("WEFT_TIMEOUT"), Error);
  unsetenv("WEFT_TIMEOUT");
  EXPECT_THROW(config::lookup("WEFT_NO_SUCH_THING"), Error);
}

}  // namespace
}  // namespace weft
