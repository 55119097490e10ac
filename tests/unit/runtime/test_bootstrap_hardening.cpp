// Bootstrap hardening (issue 26): the secret never printed (weft env's table, logs at every
// level), kept in memory left out of core dumps and wiped on destroy; wildcard root
// addresses refused naming the variable; a flood of refused connections logging a few
// rate-limited lines instead of one each.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "scoped_env.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/bootstrap_wire.hpp"
#include "bootstrap/rendezvous.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/secure_memory.hpp"

namespace weft {
namespace {

using test::EnvVar;
using test::read_text;
using test::TempDir;

using Clock = std::chrono::steady_clock;

net::Address loopback() { return net::resolve("127.0.0.1", 0); }


std::string hex_of(const uint8_t* p, size_t n, bool upper = false) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), upper ? "%02X" : "%02x", p[i]);
    s += b;
  }
  return s;
}

int free_port() {
  net::Socket probe = net::Socket::listen(loopback());
  return probe.local_address().port;
}

/// Runs fn(i) on `n` threads; returns each one's error message ("" when it succeeded).
template <typename Fn>
std::vector<std::string> run_threads(int n, Fn fn) {
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const Error& e) {
        out[static_cast<size_t>(i)] = e.what();
        if (out[static_cast<size_t>(i)].empty()) out[static_cast<size_t>(i)] = "error";
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// ---- the secret is never printed -------------------------------------------------------

TEST(SecretHidden, WeftEnvTableShowsSetHiddenAndConfigRefusesToCopyIt) {
  const std::string secret = "0123456789abcdef0123456789abcdef0123456789ABCDEF0123456789abcdef";
  EnvVar s("WEFT_BOOTSTRAP_SECRET", secret.c_str()), t("WEFT_BOOTSTRAP_TIMEOUT", "7");
  const std::string table = config::format_table();
  EXPECT_EQ(table.find("0123456789"), std::string::npos) << table;
  EXPECT_NE(table.find("WEFT_BOOTSTRAP_SECRET  (string, default '', set (hidden))"), std::string::npos) << table;
  EXPECT_NE(table.find("WEFT_BOOTSTRAP_TIMEOUT  (seconds, default '60', set to '7')"), std::string::npos);
  EXPECT_TRUE(config::lookup("WEFT_BOOTSTRAP_SECRET").secret);
  try {
    config::get_string("WEFT_BOOTSTRAP_SECRET");
    FAIL() << "the registry handed out a copy of the secret";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal);
    EXPECT_EQ(std::string(e.what()).find("0123456789"), std::string::npos) << e.what();
  }
}

TEST(SecretHidden, NoLogLineAtAnyLevelCarriesTheSecretOrTheKey) {
  const std::string secret = "5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e7abcd";
  for (const char* level : {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}) {
    SCOPED_TRACE(level);
    TempDir dir("weft-harden-test");
    const std::string log_path = dir.path + "/log";
    std::string key_hex, key_raw;
    {
      EnvVar lf("WEFT_LOG_FILE", log_path.c_str()), ll("WEFT_LOG_LEVEL", level), ls("WEFT_LOG_SUBSYS", "ALL"),
          a("WEFT_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(free_port())).c_str()),
          s("WEFT_BOOTSTRAP_SECRET", secret.c_str()), d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()),
          t("WEFT_BOOTSTRAP_TIMEOUT", "10");
      log::reload();
      std::vector<UniqueId> ids = {rendezvous::unique_id_from_env(0, 2, "job"),
                                   rendezvous::unique_id_from_env(1, 2, "job")};
      key_hex = hex_of(ids[0].secret.data(), ids[0].secret.size());
      key_raw.assign(reinterpret_cast<const char*>(ids[0].secret.data()), ids[0].secret.size());
      // An outsider with another secret is refused (WARN lines), then the ranks join.
      UniqueId outsider = ids[1];
      outsider.secret = auth::random_secret();
      EXPECT_THROW(Bootstrap::join(outsider, 1, 2, 2), Error);
      {
        net::Socket junk = net::Socket::connect(ids[0].root, net::deadline_in(3), "root");
        const std::string garbage(sizeof(bootwire::Open), 'x');
        junk.send_all(garbage.data(), garbage.size(), net::deadline_in(3), "root");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the root refuses it (WARN)
      auto errors = run_threads(2, [&](int r) { Bootstrap::join(ids[static_cast<size_t>(r)], r, 2, 10)->barrier(5); });
      EXPECT_EQ(errors[0], "");
      EXPECT_EQ(errors[1], "");
      // A malformed secret is an error that does not echo it.
      EnvVar bad("WEFT_BOOTSTRAP_SECRET", (secret.substr(0, 40) + "zz").c_str());
      try {
        rendezvous::unique_id_from_env(1, 2, "job");
        ADD_FAILURE() << "a malformed secret was taken";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find(secret.substr(0, 16)), std::string::npos) << e.what();
      }
    }
    log::reload();
    const std::string text = read_text(log_path);
    if (std::string(level) != "ERROR") {
      EXPECT_NE(text.find(" BOOT "), std::string::npos) << "nothing was logged";
    }
    for (const std::string& needle :
         {secret, secret.substr(0, 16), secret.substr(40, 16), key_hex, hex_of(reinterpret_cast<const uint8_t*>(key_raw.data()), 32, true)})
      EXPECT_EQ(text.find(needle), std::string::npos) << needle << " in\n" << text;
    EXPECT_EQ(text.find(key_raw.substr(0, 8)), std::string::npos) << "the key's raw bytes are in the log";
  }
}

// ---- the secret in memory ----------------------------------------------------------------

/// The VmFlags of the mapping of /proc/self/smaps that holds `p` ("" when none does).
std::string vm_flags_of(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') != std::string::npos &&
        line.find('-') < line.find(' '))
      inside = addr >= lo && addr < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return "";
}

bool has_flag(const std::string& flags, const char* f) { return (flags + " ").find(std::string(" ") + f + " ") != std::string::npos; }

TEST(SecretMemory, SecretsLiveOutsideCoreDumpsAndAreWipedOnDestroy) {
  const uint8_t* slot = nullptr;
  {
    auth::Secret s = auth::random_secret();
    slot = s.data();
    ASSERT_TRUE(std::any_of(s.begin(), s.end(), [](uint8_t b) { return b != 0; }));
    const std::string flags = vm_flags_of(slot);
    ASSERT_NE(flags, "") << "no mapping holds the secret";
    EXPECT_TRUE(has_flag(flags, "dd")) << "not excluded from core dumps: " << flags;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % secure::kSlotBytes, 0u);
    rlimit lim{};
    if (secure::stats().locked_pages == secure::stats().pages && getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
      EXPECT_TRUE(has_flag(flags, "lo")) << "counted as locked but not: " << flags;
    }
    // A copy has memory of its own, equally protected; a moved-from secret reads as zero.
    auth::Secret copy = s;
    EXPECT_NE(copy.data(), slot);
    EXPECT_TRUE(copy == s);
    EXPECT_TRUE(has_flag(vm_flags_of(copy.data()), "dd"));
    auth::Secret moved = std::move(copy);
    EXPECT_TRUE(moved == s);
    EXPECT_TRUE(copy == auth::Secret{});  // NOLINT(bugprone-use-after-move): defined as empty
    // The secret of a unique id and of one read from hex live there too.
    UniqueId id = start_bootstrap_root(loopback(), 0, 0.2);
    EXPECT_TRUE(has_flag(vm_flags_of(id.secret.data()), "dd"));
    auth::Secret from_hex = auth::secret_from_hex(std::string(64, 'a'), "S");
    EXPECT_TRUE(has_flag(vm_flags_of(from_hex.data()), "dd"));
  }
  // Destroyed: its bytes (still mapped, back in the pool) are zero.
  EXPECT_TRUE(std::all_of(slot, slot + auth::Secret::kBytes, [](uint8_t b) { return b == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the root above gives up
}

// ---- wildcard addresses ----------------------------------------------------------------

/// Whether /proc/net/tcp or tcp6 lists a listener (state 0A) on `port`.
bool listening_on(int port) {
  char want[16];
  std::snprintf(want, sizeof(want), ":%04X ", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(read_text(f));
    std::string line;
    while (std::getline(in, line))
      if (line.find(want) != std::string::npos && line.find(want) < 50 && line.find(" 0A ") != std::string::npos)
        return true;
  }
  return false;
}

TEST(BootstrapWildcard, WildcardRootAddressesAreRefusedNamingTheVariable) {
  TempDir dir("weft-harden-test");
  const int port = free_port();
  const std::string p = std::to_string(port);
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()), m("MASTER_ADDR", nullptr), t("WEFT_BOOTSTRAP_TIMEOUT", "2");
  for (const std::string& addr : {"0.0.0.0:" + p, "[::]:" + p, "0:" + p, "[::0]:" + p, "[0:0:0:0:0:0:0:0]:" + p,
                                  "[::ffff:0.0.0.0]:" + p, ":" + p, "[]:" + p}) {
    for (const char* secret : {"ab01ab01ab01ab01ab01ab01ab01ab01", static_cast<const char*>(nullptr)}) {
      SCOPED_TRACE(addr + (secret ? " with a secret" : " without"));
      EnvVar a("WEFT_BOOTSTRAP_ADDR", addr.c_str()), s("WEFT_BOOTSTRAP_SECRET", secret);
      for (int rank : {0, 1}) {
        try {
          rendezvous::unique_id_from_env(rank, 2, "job");
          ADD_FAILURE() << "rank " << rank << " took the address";
        } catch (const Error& e) {
          const std::string msg = e.what();
          EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << msg;
          EXPECT_EQ(msg.rfind("WEFT_BOOTSTRAP_ADDR='" + addr + "'", 0), 0u) << msg;
          if (addr[0] != ':' && addr.rfind("[]", 0) != 0) {
            EXPECT_NE(msg.find("is a wildcard address"), std::string::npos) << msg;
          }
        }
      }
      EXPECT_FALSE(listening_on(port)) << "something listens on port " << port;
    }
  }
  // MASTER_ADDR is named when the address comes from it.
  EnvVar a("WEFT_BOOTSTRAP_ADDR", nullptr), ma("MASTER_ADDR", "0.0.0.0"), mp("MASTER_PORT", std::to_string(port - 1).c_str()),
      s("WEFT_BOOTSTRAP_SECRET", nullptr);
  try {
    rendezvous::unique_id_from_env(0, 2, "job");
    ADD_FAILURE() << "MASTER_ADDR=0.0.0.0 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("MASTER_ADDR='0.0.0.0'", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("wildcard"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(listening_on(port));
  // The root itself never listens on a wildcard, whoever asks.
  EXPECT_THROW(start_bootstrap_root(net::resolve("0.0.0.0", 0), 0, 1), Error);
  EXPECT_THROW(start_bootstrap_root(net::resolve("::", 0), 0, 1), Error);
}

// ---- a flood of refused connections ----------------------------------------------------

TEST(BootstrapFlood, ThousandRefusedConnectionsLogAFewCountedLines) {
  constexpr int kFlood = 1000;
  TempDir dir("weft-harden-test");
  const std::string log_path = dir.path + "/log";
  int refused = 0, dropped = 0;
  double seconds = 0;
  {
    EnvVar lf("WEFT_LOG_FILE", log_path.c_str()), ll("WEFT_LOG_LEVEL", "WARN"), ls("WEFT_LOG_SUBSYS", "ALL");
    log::reload();
    net::Socket listener = net::Socket::listen(loopback());
    const net::Address at = listener.local_address();
    const auto t0 = Clock::now();
    {
      bootwire::Acceptor acceptor(listener, 42, auth::random_secret(), "the test root");
      std::thread flood([&] {
        char garbage[sizeof(bootwire::Open)];
        std::memset(garbage, 'x', sizeof(garbage));
        for (int i = 0; i < kFlood; ++i) {
          net::Socket s = net::Socket::connect(at, net::deadline_in(20), "the test root");
          s.send_all(garbage, sizeof(garbage), net::deadline_in(20), "the test root");
        }
      });
      const auto limit = Clock::now() + std::chrono::seconds(60);
      while (acceptor.refused() + acceptor.dropped() < kFlood && Clock::now() < limit)
        EXPECT_FALSE(acceptor.next(net::deadline_in(0.2)));
      flood.join();
      refused = acceptor.refused();
      dropped = acceptor.dropped();
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }  // the acceptor's last line: the total
  }
  log::reload();
  ASSERT_EQ(refused + dropped, kFlood);
  EXPECT_GT(refused, kFlood / 2);  // (a connection reset before its bytes are read is a drop)
  const std::string text = read_text(log_path);
  std::istringstream in(text);
  std::string line;
  int lines = 0, one_by_one = 0;
  long counted = 0, in_all = -1, left_out = -1;
  const std::regex more(R"(the test root: (\d+) more connections refused or dropped in the last [0-9.]+ s)");
  const std::regex total(R"(the test root: (\d+) connections refused or dropped in all \((\d+) of them)");
  while (std::getline(in, line)) {
    ++lines;
    std::smatch m;
    if (std::regex_search(line, m, more)) {
      counted += std::stol(m[1]);
    } else if (std::regex_search(line, m, total)) {
      in_all = std::stol(m[1]);
      left_out = std::stol(m[2]);
    } else if (line.find("the test root") != std::string::npos) {
      ++one_by_one;  // "refused the connection from 127.0.0.1:...", or a drop at WARN
    }
  }
  // At most 5 lines one by one and one count line per second, and the total.
  const int intervals = static_cast<int>(seconds) + 2;
  EXPECT_LE(one_by_one, 5 * intervals) << text;
  EXPECT_LE(lines, 6 * intervals + 1) << seconds << " s\n" << text;
  EXPECT_GE(in_all, refused) << text;  // plus any WARN-level drops
  EXPECT_EQ(one_by_one + counted, in_all) << text;
  EXPECT_EQ(counted, left_out) << text;
}

}  // namespace
}  // namespace weft
