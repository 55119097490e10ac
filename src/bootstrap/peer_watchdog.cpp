#include "bootstrap/peer_watchdog.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/error.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

/// What /proc/<pid>/stat says of a process.
struct Stat {
  char state = 0;
  uint64_t flags = 0;
  uint64_t start_time = 0;
};

/// Reads /proc/<pid>/stat; false when it cannot be read (no such process).
bool read_stat(int32_t pid, Stat* st) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are
  // counted after the last ')'. State is field 3, the flags field 9, the start time 22.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field) || field.empty()) return false;
    if (i == 3) st->state = field[0];
    if (i == 9) st->flags = std::strtoull(field.c_str(), nullptr, 10);
  }
  st->start_time = std::strtoull(field.c_str(), nullptr, 10);
  return true;
}

/// PF_EXITING (the Linux kernel's sched.h): set on a task as it starts to exit, before it closes
/// its files, so a dying process is seen before its sockets close.
constexpr uint64_t kExiting = 0x4;

}  // namespace

uint64_t process_start_time(int32_t pid) {
  Stat st;
  return pid > 0 && read_stat(pid, &st) ? st.start_time : 0;
}

bool process_alive(int32_t pid, uint64_t start_time) {
  Stat st;
  if (pid <= 0 || !read_stat(pid, &st)) return false;
  // The flags and state are those of the process's main thread: a main thread that ends
  // alone (pthread_exit) while others run reads as an exited process.
  if (st.state == 'Z' || st.state == 'X' || st.state == 'x' || (st.flags & kExiting) != 0) return false;
  return start_time == 0 || st.start_time == start_time;
}

bool process_visible(int32_t pid, uint64_t start_time) {
  return start_time != 0 && process_start_time(pid) == start_time;
}

std::vector<WatchedPeer> watch_list(int rank, const std::vector<PeerProcess>& procs, int next_fd, int prev_fd) {
  const int n = static_cast<int>(procs.size());
  const int32_t me = procs[static_cast<size_t>(rank)].pid;
  std::vector<WatchedPeer> out;
  for (int p = 0; p < n; ++p) {
    const PeerProcess& pp = procs[static_cast<size_t>(p)];
    if (p != rank && pp.pid != me && process_visible(pp.pid, pp.start_time))
      out.push_back(WatchedPeer{p, pp.pid, pp.start_time, -1});
  }
  if (n > 1) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    if (procs[static_cast<size_t>(next)].pid != me && next_fd >= 0) out.push_back(WatchedPeer{next, 0, 0, next_fd});
    if (procs[static_cast<size_t>(prev)].pid != me && prev_fd >= 0) out.push_back(WatchedPeer{prev, 0, 0, prev_fd});
  }
  return out;
}

PeerWatchdog::PeerWatchdog(std::vector<WatchedPeer> peers, OnLoss on_loss, double period_s)
    : peers_(std::move(peers)), on_loss_(std::move(on_loss)), period_s_(period_s) {
  bool any = false;
  for (const WatchedPeer& p : peers_) any |= p.pid > 0 || p.fd >= 0;
  if (!any) return;
  if (::pipe(wake_) != 0) fail(ErrorCode::System, std::string("pipe for the peer watchdog: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

PeerWatchdog::~PeerWatchdog() { stop(); }

void PeerWatchdog::stop() {
  if (thread_.joinable()) {
    const char x = 1;
    while (::write(wake_[1], &x, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  for (int& fd : wake_)
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
}

int PeerWatchdog::exited_peer() const {
  for (size_t i = 0; i < peers_.size(); ++i)
    if (peers_[i].pid > 0 && !process_alive(peers_[i].pid, peers_[i].start_time)) return static_cast<int>(i);
  return -1;
}

void PeerWatchdog::run() {
  std::vector<pollfd> fds;
  std::vector<size_t> owner;  // fds[i + 1] watches peers_[owner[i]]
  fds.push_back(pollfd{wake_[0], POLLIN, 0});
  for (size_t i = 0; i < peers_.size(); ++i)
    if (peers_[i].fd >= 0) {
      fds.push_back(pollfd{peers_[i].fd, POLLRDHUP, 0});
      owner.push_back(i);
    }
  const int period_ms = std::max(1, static_cast<int>(period_s_ * 1000));
  auto exited_why = [&](size_t i) {
    return "rank " + std::to_string(peers_[i].rank) + " (process " + std::to_string(peers_[i].pid) + ") exited";
  };
  for (;;) {
    for (pollfd& p : fds) p.revents = 0;
    const int rc = ::poll(fds.data(), fds.size(), period_ms);
    if (rc < 0 && errno != EINTR) {
      WEFT_LOG(Warn, "INIT",
               "peer watchdog: poll failed (" << std::strerror(errno) << "); peers are no longer watched");
      return;
    }
    if (fds[0].revents != 0) return;  // stop()
    int lost = exited_peer();
    std::string why;
    if (lost >= 0) {
      why = exited_why(static_cast<size_t>(lost));
    } else {
      for (size_t k = 1; k < fds.size() && lost < 0; ++k)
        if (fds[k].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) lost = static_cast<int>(owner[k - 1]);
      if (lost < 0) continue;
      // A connection closed. If a peer process exited, name it, not the neighbour that may
      // only pass the news on: a dying process closes its sockets before /proc shows it
      // gone, so look again for a short while.
      why = "rank " + std::to_string(peers_[static_cast<size_t>(lost)].rank) +
            " closed its bootstrap connection (it exited, aborted, or lost a peer of its own)";
      for (int tries = 0; tries < 33; ++tries) {
        const int dead = exited_peer();
        if (dead >= 0) {
          lost = dead;
          why = exited_why(static_cast<size_t>(dead));
          break;
        }
        pollfd w{wake_[0], POLLIN, 0};
        if (::poll(&w, 1, 30) > 0) return;  // stop()
      }
    }
    on_loss_(peers_[static_cast<size_t>(lost)].rank, why);
    // Pass the news on: this rank's neighbours see its connections close.
    for (const WatchedPeer& p : peers_)
      if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
    return;
  }
}

}  // namespace weft
