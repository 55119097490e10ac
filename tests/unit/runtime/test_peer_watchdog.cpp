// The peer watchdog with fake peers: a forked process that exits, and socket pairs whose
// other end closes. Each loss is reported once, within about a second, naming the rank.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "runtime/deferred_free.hpp"
#include "bootstrap/peer_watchdog.hpp"
#include "rank_processes.hpp"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

/// Records the watchdog's reports.
struct Reports {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  int rank = -1;
  std::string why;
  Clock::time_point when;

  PeerWatchdog::OnLoss callback() {
    return [this](int r, const std::string& w) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      rank = r;
      why = w;
      when = Clock::now();
      cv.notify_all();
    };
  }
  bool wait(double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return calls > 0; });
  }
};

/// A child process that sleeps `ms` and exits; the caller reaps it.
pid_t child_exiting_after(int ms, int keep_fd = -1) {
  pid_t pid = fork();
  if (pid == 0) {
    (void)keep_fd;  // inherited: closed by the kernel when the child exits
    usleep(static_cast<useconds_t>(ms) * 1000);
    _exit(0);
  }
  return pid;
}

TEST(PeerWatchdog, ProcessLiveness) {
  const uint64_t me = process_start_time(getpid());
  EXPECT_GT(me, 0u);
  EXPECT_TRUE(process_alive(getpid(), me));
  EXPECT_TRUE(process_alive(getpid(), 0));
  EXPECT_FALSE(process_alive(getpid(), me + 12345));  // the pid names another process now
  EXPECT_FALSE(process_alive(0, 0));
  EXPECT_FALSE(process_alive(0x3ffffff0, 0));  // beyond pid_max
  pid_t child = child_exiting_after(0);
  ASSERT_GT(child, 0);
  // A zombie (exited, not yet reaped) is dead; so is a reaped one.
  for (int i = 0; i < 200 && process_alive(child, 0); ++i) usleep(10000);
  EXPECT_FALSE(process_alive(child, 0));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_alive(child, 0));
}

TEST(PeerWatchdog, NamesAPeerProcessThatExitsWithinASecond) {
  pid_t child = child_exiting_after(300);
  ASSERT_GT(child, 0);
  const uint64_t start = process_start_time(child);
  ASSERT_GT(start, 0u);
  Reports got;
  PeerWatchdog w({WatchedPeer{3, static_cast<int32_t>(child), start, -1}}, got.callback());
  ASSERT_TRUE(got.wait(10)) << "no report";
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(got.rank, 3);
  EXPECT_EQ(got.why, "rank 3 (process " + std::to_string(child) + ") exited");
  w.stop();
  EXPECT_EQ(got.calls, 1);
}

TEST(PeerWatchdog, AKilledPeerIsSeenAtOnce) {
  pid_t child = child_exiting_after(60000);
  ASSERT_GT(child, 0);
  Reports got;
  PeerWatchdog w({WatchedPeer{1, static_cast<int32_t>(child), process_start_time(child), -1}}, got.callback());
  usleep(200000);
  EXPECT_EQ(got.calls, 0) << "a live peer reported: " << got.why;
  const auto killed = Clock::now();
  kill(child, SIGKILL);
  ASSERT_TRUE(got.wait(10));
  waitpid(child, nullptr, 0);
  EXPECT_EQ(got.rank, 1);
  EXPECT_LT(std::chrono::duration<double>(got.when - killed).count(), 1.0);
}

TEST(PeerWatchdog, AClosedConnectionIsALossAndIsPassedOn) {
  int a[2], b[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
  Reports got;
  PeerWatchdog w({WatchedPeer{2, 0, 0, a[0]}, WatchedPeer{5, 0, 0, b[0]}}, got.callback());
  usleep(150000);
  // Data on a connection is no loss.
  ASSERT_EQ(write(a[1], "x", 1), 1);
  usleep(150000);
  EXPECT_EQ(got.calls, 0);
  close(a[1]);
  ASSERT_TRUE(got.wait(10));
  EXPECT_EQ(got.rank, 2);
  EXPECT_NE(got.why.find("rank 2 closed its bootstrap connection"), std::string::npos) << got.why;
  // The watchdog shut its other connection down: rank 5's end sees it closed.
  char c = 0;
  pollfd p{b[1], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_EQ(read(b[1], &c, 1), 0);
  w.stop();
  EXPECT_EQ(got.calls, 1);
  for (int fd : {a[0], b[0], b[1]}) close(fd);
}

TEST(PeerWatchdog, AnExitedProcessIsNamedRatherThanTheConnectionThatClosed) {
  // Rank 1's process holds the far end of the connection to rank 2 (as if rank 2 were
  // rank 1's neighbour passing the news on): the report names rank 1.
  int a[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
  pid_t child = child_exiting_after(300, a[1]);
  ASSERT_GT(child, 0);
  close(a[1]);
  Reports got;
  PeerWatchdog w({WatchedPeer{2, 0, 0, a[0]}, WatchedPeer{1, static_cast<int32_t>(child), process_start_time(child), -1}},
                 got.callback(), 5.0);  // processes checked rarely: the connection closes first
  ASSERT_TRUE(got.wait(10));
  waitpid(child, nullptr, 0);
  EXPECT_EQ(got.rank, 1) << got.why;
  EXPECT_EQ(got.why, "rank 1 (process " + std::to_string(child) + ") exited");
  w.stop();
  close(a[0]);
}

TEST(PeerWatchdog, StopEndsTheWatchWithoutAReport) {
  pid_t child = child_exiting_after(60000);
  Reports got;
  {
    PeerWatchdog w({WatchedPeer{1, static_cast<int32_t>(child), process_start_time(child), -1}}, got.callback());
    usleep(100000);
    w.stop();
    w.stop();  // idempotent
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(got.calls, 0);
  PeerWatchdog nothing({WatchedPeer{4, 0, 0, -1}}, got.callback());  // nothing to watch: no thread
}

TEST(PeerWatchdog, WatchListTakesVisibleProcessesAndRemoteNeighbours) {
  const int32_t me = getpid();
  const uint64_t st = process_start_time(me);
  pid_t child = child_exiting_after(60000);
  const uint64_t cst = process_start_time(child);
  // Ranks 0 and 1 in this process, 2 the child, 3 a pid this process cannot see as the same
  // process (another pid namespace: the start time differs).
  std::vector<PeerProcess> procs = {
      {me, st}, {me, st}, {static_cast<int32_t>(child), cst}, {static_cast<int32_t>(child), cst + 1}};
  auto w = watch_list(1, procs, 11, 10);
  // Rank 1 watches rank 2's process and its connection to rank 2 (next); rank 0 (prev)
  // shares its process; rank 3's pid is not the process it claims.
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rank, 2);
  EXPECT_EQ(w[0].pid, child);
  EXPECT_EQ(w[0].fd, -1);
  EXPECT_EQ(w[1].rank, 2);
  EXPECT_EQ(w[1].fd, 11);
  EXPECT_TRUE(watch_list(0, {{me, st}}, -1, -1).empty());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// End to end without a GPU: four processes join a bootstrap on loopback, tell each other
// their pids as the communicator does, and watch; rank 2 then exits without a word. Every
// other rank must name rank 2 within two seconds, ring neighbours or not.
TEST(PeerWatchdog, ARingOfProcessesNamesTheRankThatExits) {
  const int n = 4, dying = 2;
  UniqueId id = start_bootstrap_root(net::resolve("127.0.0.1", 0), 0, 20);
  test::run_rank_processes(n, [&](int r) {
    auto b = Bootstrap::join(id, r, n, 20);
    std::vector<PeerProcess> procs(n);
    procs[r] = PeerProcess{static_cast<int32_t>(getpid()), process_start_time(getpid())};
    b->allgather(procs.data(), sizeof(PeerProcess), 20);
    Reports got;
    PeerWatchdog w(watch_list(r, procs, b->next_fd(), b->prev_fd()), got.callback());
    b->barrier(20);
    if (r == dying) {
      usleep(300000);
      _exit(0);
    }
    int status = 0;
    const auto t0 = Clock::now();
    if (got.wait(10)) {
      const double s = std::chrono::duration<double>(got.when - t0).count();
      const std::string want = "rank 2 (process " + std::to_string(procs[dying].pid) + ") exited";
      status = got.rank == dying && got.why == want && s < 2.3 ? 0 : 3;
      if (status != 0) std::printf("rank %d: got rank %d after %.2f s: %s\n", r, got.rank, s, got.why.c_str());
    } else {
      std::printf("rank %d: no report\n", r);
      status = 4;
    }
    w.stop();
    // Stay until every rank has seen rank 2 go: a survivor that exits at once would be a
    // second dead peer, which a slower rank might name instead.
    usleep(1500000);
    return status;
  });
}

// Memory peers may still write into is freed only once every writer is done.
TEST(DeferredFree, WaitsForLocalPeersToStop) {
  auto mine = make_done_flag(), peer = make_done_flag();
  EXPECT_NE(mine->id, peer->id);
  EXPECT_EQ(find_done_flag(peer->id), peer);
  int freed = 0;
  Writers w;
  w.local.push_back(find_done_flag(peer->id));
  EXPECT_FALSE(free_when_done(w, [&] { ++freed; }));
  EXPECT_EQ(freed, 0);
  EXPECT_EQ(deferred_count(), 1u);
  EXPECT_EQ(sweep_deferred(), 0);
  peer->done = true;
  EXPECT_EQ(sweep_deferred(), 1);
  EXPECT_EQ(freed, 1);
  EXPECT_EQ(deferred_count(), 0u);
  EXPECT_TRUE(free_when_done(w, [&] { ++freed; }));  // all done already: at once
  EXPECT_EQ(freed, 2);
  const uint64_t id = peer->id;
  w.local.clear();
  peer.reset();
  EXPECT_EQ(find_done_flag(id), nullptr);
}

TEST(DeferredFree, WaitsForRemotePeersToExitOrTheGraceTime) {
  pid_t child = child_exiting_after(60000);
  ASSERT_GT(child, 0);
  int freed = 0;
  Writers w;
  w.remote.push_back({static_cast<int32_t>(child), process_start_time(child)});
  free_when_done(w, [&] { ++freed; });  // no grace time (no deadline): only the exit counts
  w.grace_end = Clock::now() + std::chrono::milliseconds(300);
  free_when_done(w, [&] { freed += 10; });
  EXPECT_EQ(sweep_deferred(), 0);
  usleep(400000);
  EXPECT_EQ(sweep_deferred(), 1);  // the grace time passed
  EXPECT_EQ(freed, 10);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(sweep_deferred(), 1);  // the writer exited
  EXPECT_EQ(freed, 11);
}

}  // namespace
}  // namespace weft
