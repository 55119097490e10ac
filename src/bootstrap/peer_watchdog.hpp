// PeerWatchdog: notices, within about a second, that a peer of a communicator is gone, so
// that a dead rank is an error naming it instead of a wait until WEFT_TIMEOUT.
//
// One thread per communicator watches two signs, for each peer it can:
//   - its process (same host): exiting, gone, a zombie, or its pid now naming another
//     process (the start time exchanged at initialization differs) means it exited;
//   - a connection to it (the bootstrap ring's sockets to the neighbours): closed or reset
//     means it exited, aborted, or gave up after losing a peer of its own.
// The first loss is reported once, through the callback, from the watchdog's thread; the
// watchdog then shuts its own connections down, so that the neighbours of this rank learn
// at once too (an abort spreads around the ring in milliseconds). When a connection closes
// while some peer process has exited, the exited process is named, not the neighbour that
// passed the news on.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace weft {

/// The start time of process `pid` (clock ticks since boot, /proc/<pid>/stat), 0 when no
/// such process is visible.
uint64_t process_start_time(int32_t pid);

/// False when process `pid` is exiting or has exited (gone or a zombie), or the pid now
/// names a process that did not start at `start_time` (0: any start time).
bool process_alive(int32_t pid, uint64_t start_time);

/// True when this process sees `pid` as the process that started at `start_time` (same
/// host and pid namespace); only then can its liveness be read here.
bool process_visible(int32_t pid, uint64_t start_time);

/// What each rank tells the others at initialization, for the watch.
struct PeerProcess {
  int32_t pid = 0;
  uint64_t start_time = 0;  ///< process_start_time(pid) as that rank read it
};

struct WatchedPeer;

/// The watch of rank `rank` (procs by rank, procs[rank] its own): the process of every peer
/// in another process that this one sees (process_visible), and the ring connections to
/// rank + 1 (`next_fd`) and from rank - 1 (`prev_fd`) where that neighbour lives in another
/// process. Peers in this process are not watched: they cannot die alone.
std::vector<WatchedPeer> watch_list(int rank, const std::vector<PeerProcess>& procs, int next_fd, int prev_fd);

struct WatchedPeer {
  int rank = -1;
  int32_t pid = 0;          ///< 0: its process is not watched (another host, or this process)
  uint64_t start_time = 0;  ///< process_start_time of pid at initialization
  int fd = -1;              ///< a connection whose closing means the peer is gone; -1: none
};

class PeerWatchdog {
 public:
  /// Called at most once, from the watchdog's thread: `rank` is the lost peer, `why` one
  /// sentence ("rank 1 (process 4711) exited").
  using OnLoss = std::function<void(int rank, const std::string& why)>;

  /// Starts watching (nothing to watch: no thread). `period_s`: how often processes are
  /// checked (connections are watched continuously).
  PeerWatchdog(std::vector<WatchedPeer> peers, OnLoss on_loss, double period_s = 0.1);
  ~PeerWatchdog();
  PeerWatchdog(const PeerWatchdog&) = delete;
  PeerWatchdog& operator=(const PeerWatchdog&) = delete;

  /// Stops the thread; on_loss is not called once this returns. Idempotent.
  void stop();

 private:
  void run();
  /// The first watched peer whose process has exited, or -1.
  int exited_peer() const;

  std::vector<WatchedPeer> peers_;
  OnLoss on_loss_;
  double period_s_;
  int wake_[2] = {-1, -1};  ///< a pipe: stop() writes, the thread polls the read end
  std::thread thread_;
};

}  // namespace weft
