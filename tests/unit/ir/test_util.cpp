#include <gtest/gtest.h>

#include <cstdlib>

#include "util/checked.hpp"
#include "util/config.hpp"
#include "util/handle_registry.hpp"
#include "util/log.hpp"
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
  EXPECT_DOUBLE_EQ(config::get_seconds("WEFT_TIMEOUT"), 600.0);  // PyTorch's watchdog allows 10 minutes
  setenv("WEFT_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(config::get_seconds("WEFT_TIMEOUT"), 2.5);
  setenv("WEFT_TIMEOUT", "0", 1);  // documented: no deadline
  EXPECT_DOUBLE_EQ(config::get_seconds("WEFT_TIMEOUT"), 0.0);
  setenv("WEFT_TIMEOUT", "soon", 1);
  EXPECT_THROW(config::get_seconds("WEFT_TIMEOUT"), Error);
  unsetenv("WEFT_TIMEOUT");
  EXPECT_THROW(config::lookup("WEFT_NO_SUCH_THING"), Error);
}

/// The message of the error that reading `name` set to `value` throws ("" if none).
std::string error_of(const char* name, const char* value) {
  setenv(name, value, 1);
  std::string msg;
  try {
    const config::Variable& v = config::lookup(name);
    if (v.type == config::Type::Int) config::get_int(name);
    else config::get_seconds(name);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    msg = e.what();
  }
  unsetenv(name);
  return msg;
}

TEST(Config, IntegersAreStrictDecimal) {
  setenv("WEFT_INSTANCES", "12", 1);
  EXPECT_EQ(config::get_int("WEFT_INSTANCES"), 12);
  unsetenv("WEFT_INSTANCES");
  EXPECT_EQ(config::get_int("WEFT_INSTANCES"), 0);
  // Each refused value, and the error names the variable and the value.
  for (const char* bad : {"-1", "010", "0x10", "12abc", " 12", "12 ", "+3", "1.5", "", "-", "1e3",
                          "99999999999999999999999", "1025"}) {
    std::string m = error_of("WEFT_INSTANCES", bad);
    EXPECT_NE(m.find("WEFT_INSTANCES='" + std::string(bad) + "'"), std::string::npos) << bad << ": " << m;
  }
  EXPECT_NE(error_of("WEFT_INSTANCES", "010").find("octal"), std::string::npos);
  EXPECT_NE(error_of("WEFT_INSTANCES", "-1").find("outside 0..1024"), std::string::npos);
  EXPECT_NE(error_of("WEFT_FIFO_DEPTH", "1").find("outside 2..64"), std::string::npos);
  EXPECT_NE(error_of("WEFT_SLOT_BYTES", "4095").find("outside"), std::string::npos);
  EXPECT_NE(error_of("WEFT_MICROBATCH_BYTES", "-4096").find("outside"), std::string::npos);
  EXPECT_EQ(error_of("WEFT_FIFO_DEPTH", "8"), "");
  EXPECT_EQ(error_of("WEFT_MICROBATCH_BYTES", "0"), "");
}

TEST(Config, SecondsAreFiniteAndInRange) {
  EXPECT_EQ(error_of("WEFT_TIMEOUT", "30"), "");
  EXPECT_EQ(error_of("WEFT_TIMEOUT", "0.25"), "");
  EXPECT_EQ(error_of("WEFT_TIMEOUT", "1000000"), "");
  for (const char* bad : {"inf", "INF", "nan", "-1", "-0.5", "1e3", "0x10", " 5", "5s", ".5", "", "1000001",
                          "1e400"}) {
    std::string m = error_of("WEFT_TIMEOUT", bad);
    EXPECT_NE(m.find("WEFT_TIMEOUT='" + std::string(bad) + "'"), std::string::npos) << bad << ": " << m;
  }
  EXPECT_NE(error_of("WEFT_TIMEOUT", "2000000").find("outside 0..1000000 seconds"), std::string::npos);
  EXPECT_NE(error_of("WEFT_BOOTSTRAP_TIMEOUT", "0").find("outside"), std::string::npos);
}

TEST(Config, ValidateEnvironmentReportsTheFirstBadValue) {
  EXPECT_NO_THROW(config::validate_environment());
  setenv("WEFT_FIFO_DEPTH", "010", 1);
  try {
    config::validate_environment();
    ADD_FAILURE() << "WEFT_FIFO_DEPTH=010 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_FIFO_DEPTH='010'"), std::string::npos) << e.what();
  }
  unsetenv("WEFT_FIFO_DEPTH");
  setenv("WEFT_LOG_FILE", "-1", 1);  // strings are taken as given
  EXPECT_NO_THROW(config::validate_environment());
  unsetenv("WEFT_LOG_FILE");
  // Every numeric default is inside its own range.
  for (const auto& v : config::registry()) {
    if (v.type == config::Type::Int) {
      EXPECT_NO_THROW(config::get_int(v.name)) << v.name;
    } else if (v.type == config::Type::Seconds) {
      EXPECT_NO_THROW(config::get_seconds(v.name)) << v.name;
    }
  }
}

TEST(Checked, OverflowIsAnErrorNamingTheOperands) {
  EXPECT_EQ(checked_mul(1ull << 20, 4, "x"), 4ull << 20);
  EXPECT_EQ(checked_mul(0, ~0ull, "x"), 0u);
  try {
    checked_mul(1ull << 62, 4, "the count times the element size");
    ADD_FAILURE() << "2^62 x 4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(std::string(e.what()), "the count times the element size: 4611686018427387904 x 4 overflows 64 bits");
  }
  EXPECT_NO_THROW(check_span(reinterpret_cast<void*>(uintptr_t{4096}), 1ull << 40, "buf"));
  EXPECT_THROW(check_span(reinterpret_cast<void*>(~uintptr_t{0} - 15), 32, "buf"), Error);
}

TEST(HandleRegistry, LiveFromAddUntilRetire) {
  HandleRegistry r;
  int a = 0, b = 0;
  EXPECT_FALSE(r.live(&a));
  r.add(&a);
  EXPECT_TRUE(r.live(&a));
  EXPECT_FALSE(r.live(&b));
  EXPECT_TRUE(r.retire(&a));
  EXPECT_FALSE(r.live(&a));
  EXPECT_FALSE(r.retire(&a));  // twice: refused
  EXPECT_FALSE(r.retire(&b));  // never added
}

// The level check every WEFT_LOG runs first: a relaxed load of the level read from
// WEFT_LOG_LEVEL (or WEFT_DEBUG), then the subsystems under the lock.
TEST(Log, LevelAndSubsystems) {
  const char* saved_debug = std::getenv("WEFT_DEBUG");
  const std::string debug = saved_debug ? saved_debug : "";
  const char* saved_level = std::getenv("WEFT_LOG_LEVEL");
  const std::string level = saved_level ? saved_level : "";
  const char* saved_subsys = std::getenv("WEFT_LOG_SUBSYS");
  const std::string subsys = saved_subsys ? saved_subsys : "";
  unsetenv("WEFT_DEBUG");
  setenv("WEFT_LOG_LEVEL", "INFO", 1);
  setenv("WEFT_LOG_SUBSYS", "coll,init", 1);
  log::reload();
  EXPECT_EQ(log::detail::least_level.load(), static_cast<int>(log::Level::Info));
  EXPECT_FALSE(log::enabled(log::Level::Debug, "COLL"));
  EXPECT_TRUE(log::enabled(log::Level::Info, "COLL"));
  EXPECT_TRUE(log::enabled(log::Level::Error, "init"));
  EXPECT_FALSE(log::enabled(log::Level::Warn, "PLAN"));  // not a listed subsystem
  EXPECT_FALSE(log::enabled(log::Level::None, "COLL"));
  setenv("WEFT_LOG_LEVEL", "TRACE", 1);
  setenv("WEFT_LOG_SUBSYS", "ALL", 1);
  log::reload();
  EXPECT_TRUE(log::enabled(log::Level::Trace, "ANY"));
  setenv("WEFT_LOG_LEVEL", "NONE", 1);
  log::reload();
  EXPECT_FALSE(log::enabled(log::Level::Error, "ANY"));
  auto restore = [](const char* name, const char* was, const std::string& value) {
    if (was) setenv(name, value.c_str(), 1);
    else unsetenv(name);
  };
  restore("WEFT_DEBUG", saved_debug, debug);
  restore("WEFT_LOG_LEVEL", saved_level, level);
  restore("WEFT_LOG_SUBSYS", saved_subsys, subsys);
  log::reload();
}

}  // namespace
}  // namespace weft
