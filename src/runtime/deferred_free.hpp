// Deferred freeing of memory that peers may still write into.
//
// A communicator's arena (runtime/communicator.hpp) is written by its peers' kernels: in
// another process through CUDA IPC, in this process through peer access. Destroy and abort
// therefore free it only once no peer can write into it any more; until then it waits
// here, and every later communicator creation, destroy or abort (sweep) frees what has
// become safe. A writer is done when:
//   - in this process: its communicator has stopped (its done flag, set once its kernels
//     have finished and it launches no more);
//   - in another process: that process has exited, or the grace time has passed (every
//     device wait ends by WEFT_TIMEOUT; without a deadline there is no grace time and the
//     memory waits for the process to exit, or for this one).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace weft {

/// A communicator's "stopped" flag that the communicators of its peers in this process
/// hold. Created with an id that the ranks exchange at initialization.
struct DoneFlag {
  uint64_t id = 0;
  std::atomic<bool> done{false};
};

/// A new flag, registered under a fresh id until it is destroyed.
std::shared_ptr<DoneFlag> make_done_flag();
/// The flag registered under `id` (null when none is alive).
std::shared_ptr<DoneFlag> find_done_flag(uint64_t id);

struct Writers {
  std::vector<std::shared_ptr<const DoneFlag>> local;
  struct Process {
    int32_t pid = 0;  ///< 0: a process this one cannot see (only the grace time ends its wait)
    uint64_t start_time = 0;
  };
  std::vector<Process> remote;
  /// When remote writers count as done even if alive; max(): never.
  std::chrono::steady_clock::time_point grace_end = std::chrono::steady_clock::time_point::max();
};

/// Runs `free_fn` now if every writer is done (returns true), else keeps it until a sweep
/// finds them done (returns false).
bool free_when_done(Writers writers, std::function<void()> free_fn);
/// Runs the free functions whose writers are all done; returns how many ran.
int sweep_deferred();
/// How many free functions are waiting.
size_t deferred_count();

}  // namespace weft
