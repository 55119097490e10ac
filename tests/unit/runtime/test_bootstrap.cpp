// Bootstrap over loopback: ranks as threads (and once as processes), the failure cases
// ending in errors that name the rank at fault within a bounded time.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "rank_processes.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

net::Address loopback() { return net::resolve("127.0.0.1", 0); }

struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::Success;
  std::string message;
};

/// Runs fn(rank) on `n` threads and collects each one's outcome.
template <typename Fn>
std::vector<Outcome> run_ranks(int n, Fn fn) {
  std::vector<Outcome> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
        out[static_cast<size_t>(r)].ok = true;
      } catch (const Error& e) {
        out[static_cast<size_t>(r)].code = e.code();
        out[static_cast<size_t>(r)].message = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(UniqueId, RoundTrips) {
  UniqueId id;
  id.magic = 0x1234567890abcdefull;
  id.version = 4711;
  id.root = net::resolve("127.0.0.1", 5000);
  char buf[UniqueId::kBytes];
  id.serialize(buf);
  UniqueId back = UniqueId::deserialize(buf);
  EXPECT_EQ(back.magic, id.magic);
  EXPECT_EQ(back.version, id.version);
  EXPECT_EQ(back.root.str(), "127.0.0.1:5000");
}

TEST(Address, ParsesHostPort) {
  EXPECT_EQ(net::parse_address("127.0.0.1:80").str(), "127.0.0.1:80");
  EXPECT_EQ(net::parse_address("[::1]:81").str(), "[::1]:81");
  EXPECT_THROW(net::parse_address("127.0.0.1"), Error);
  EXPECT_THROW(net::parse_address("127.0.0.1:0"), Error);
  EXPECT_THROW(net::parse_address("127.0.0.1:99999"), Error);
}

TEST(Bootstrap, AllGatherAndBarrierOnFourRanks) {
  const int n = 4;
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  std::vector<std::vector<int>> results(n);
  auto out = run_ranks(n, [&](int r) {
    auto b = Bootstrap::join(id, r, n, 10);
    EXPECT_EQ(b->rank(), r);
    EXPECT_EQ(b->nranks(), n);
    std::vector<int> data(n * 3, -1);
    for (int i = 0; i < 3; ++i) data[r * 3 + i] = 100 * r + i;
    b->allgather(data.data(), 3 * sizeof(int), 10);
    results[static_cast<size_t>(r)] = data;
    b->barrier(10);
    b->barrier(10);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok) << out[r].message;
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 3; ++i) EXPECT_EQ(results[r][q * 3 + i], 100 * q + i) << "rank " << r;
  }
}

TEST(Bootstrap, LargeAllGatherDoesNotDeadlockOnSocketBuffers) {
  const int n = 3;
  const size_t block = 4u << 20;  // larger than any socket buffer
  UniqueId id = start_bootstrap_root(loopback(), 0, 20);
  std::vector<char> good(n, 0);  // not vector<bool>: threads write neighbouring elements
  auto out = run_ranks(n, [&](int r) {
    auto b = Bootstrap::join(id, r, n, 20);
    std::vector<uint8_t> data(block * n, 0);
    for (size_t i = 0; i < block; ++i) data[r * block + i] = static_cast<uint8_t>(i * 7 + r);
    b->allgather(data.data(), block, 20);
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; i += 4099) ok &= data[q * block + i] == static_cast<uint8_t>(i * 7 + q);
    good[static_cast<size_t>(r)] = ok;
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok) << out[r].message;
    EXPECT_TRUE(good[r]);
  }
}

TEST(Bootstrap, SingleRankNeedsNoPeers) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 5);
  auto b = Bootstrap::join(id, 0, 1, 5);
  int x = 7;
  b->allgather(&x, sizeof(x), 1);
  b->barrier(1);
  EXPECT_EQ(x, 7);
}

TEST(Bootstrap, RankThatNeverJoinsIsAnErrorNamingItInBoundedTime) {
  const int n = 3;
  UniqueId id = start_bootstrap_root(loopback(), 0, 2);
  auto t0 = Clock::now();
  auto out = run_ranks(n - 1, [&](int r) { Bootstrap::join(id, r, n, 2); });  // rank 2 never comes
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(seconds, 15.0);
  for (const auto& o : out) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, ErrorCode::Timeout);
    EXPECT_NE(o.message.find("rank 2 of 3 did not join"), std::string::npos) << o.message;
  }
}

TEST(Bootstrap, UnreachableRootTimesOut) {
  UniqueId id;
  id.magic = 42;
  id.version = bootstrap_version();
  id.secret = auth::random_secret();
  // A port nobody listens on: bind one, close it, use its number.
  {
    net::Socket s = net::Socket::listen(loopback());
    id.root = s.local_address();
  }
  auto t0 = Clock::now();
  try {
    Bootstrap::join(id, 0, 2, 1);
    FAIL() << "join succeeded without a root";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("bootstrap root"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
}

TEST(Bootstrap, OtherVersionIsAnErrorNamingTheRank) {
  const int n = 2;
  UniqueId id = start_bootstrap_root(loopback(), 0, 5);
  auto out = run_ranks(n, [&](int r) { Bootstrap::join(id, r, n, 5, r == 1 ? bootstrap_version() + 1 : 0); });
  for (const auto& o : out) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, ErrorCode::Remote);
    EXPECT_NE(o.message.find("rank 1 runs weft"), std::string::npos) << o.message;
  }
}

TEST(Bootstrap, MismatchedRankCountIsAnError) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 5);
  auto out = run_ranks(2, [&](int r) { Bootstrap::join(id, r, r == 0 ? 2 : 3, 5); });
  for (const auto& o : out) {
    EXPECT_FALSE(o.ok);
    EXPECT_NE(o.message.find("ranks"), std::string::npos) << o.message;
  }
}

TEST(Bootstrap, WrongMagicIsRejected) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 3);
  UniqueId stray = id;
  stray.magic ^= 1;
  try {
    Bootstrap::join(stray, 0, 1, 3);
    FAIL() << "a stray id joined";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another communicator"), std::string::npos) << e.what();
  }
  // The real communicator still forms.
  auto b = Bootstrap::join(id, 0, 1, 3);
  EXPECT_EQ(b->nranks(), 1);
}

TEST(Bootstrap, PeerThatClosesMidAllGatherIsARemoteError) {
  const int n = 3;
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  auto t0 = Clock::now();
  auto out = run_ranks(n, [&](int r) {
    auto b = Bootstrap::join(id, r, n, 10);
    b->barrier(10);
    if (r == 1) {
      b->close();  // dies before the all-gather
      return;
    }
    std::vector<int> data(n, r);
    b->allgather(data.data(), sizeof(int), 30);
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 20.0);
  EXPECT_TRUE(out[1].ok);
  EXPECT_FALSE(out[0].ok);
  EXPECT_FALSE(out[2].ok);
  EXPECT_EQ(out[0].code, ErrorCode::Remote) << out[0].message;
}

TEST(Bootstrap, SilentPeerTimesOutInAllGather) {
  const int n = 2;
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  std::vector<std::unique_ptr<Bootstrap>> keep(n);
  auto out = run_ranks(n, [&](int r) {
    keep[static_cast<size_t>(r)] = Bootstrap::join(id, r, n, 10);
    if (r == 1) return;  // alive but never takes part
    int data[2] = {r, r};
    keep[static_cast<size_t>(r)]->allgather(data, sizeof(int), 1);
  });
  EXPECT_FALSE(out[0].ok);
  EXPECT_EQ(out[0].code, ErrorCode::Timeout) << out[0].message;
}

TEST(Bootstrap, RanksAsProcesses) {
  const int n = 3;
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  test::run_rank_processes(n, [&](int r) {
    auto b = Bootstrap::join(id, r, n, 10);
    std::vector<int> data(n, -1);
    data[r] = r * r;
    b->allgather(data.data(), sizeof(int), 10);
    int status = 0;
    for (int q = 0; q < n; ++q) status |= data[q] != q * q;
    b->barrier(10);
    return status;
  });
}

}  // namespace
}  // namespace weft
