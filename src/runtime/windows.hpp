// Memory windows (weftCommWindowRegister; NCCL 2.28's ncclCommWindowRegister), the object
// behind weftWindow_t. Registration is collective (runtime/window_rules.hpp judges it);
// where every rank's window can be mapped by every peer, the peers map it through CUDA IPC
// at once, and AllGather, AllToAll and Broadcast whose receive buffers lie in windows run by
// copy engines straight into the peers' windows (runtime/zero_copy.cpp). Deregistration is
// local and is refused while a collective that used the window has not completed: every
// collective whose buffers overlap a window records an event on its stream afterwards
// (one per stream, re-recorded), which deregistration queries.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <exception>
#include <map>
#include <utility>
#include <vector>

struct weftWindow {
  static constexpr uint64_t kAlive = 0x776f646e69772d77ULL;  // "w-window"
  uint64_t magic = kAlive;
  uint64_t id = 0;        ///< registration number on the communicator: the same window on every rank
  int flags = 0;          ///< kWinDefault or kWinSymmetric (runtime/window_rules.hpp)
  char* ptr = nullptr;
  uint64_t bytes = 0;
  /// Every rank's window is mapped here (peer[q] below): copy engines may write into them.
  bool mapped = false;
  std::vector<char*> peer;            ///< by rank: rank q's window as reached from here; this rank's: ptr
  std::vector<uint64_t> peer_bytes;   ///< by rank
  std::map<cudaStream_t, cudaEvent_t> uses;  ///< per stream: recorded after the last collective that used it

  weftWindow() = default;
  weftWindow(const weftWindow&) = delete;
  weftWindow& operator=(const weftWindow&) = delete;
  ~weftWindow() {
    for (auto& [s, e] : uses) cudaEventDestroy(e);
    magic = 0;
  }
};

namespace weft {

/// Calls `f` when the scope ends normally (not by an exception); `f` must not throw (a
/// destructor cannot: what it throws is dropped).
template <typename F>
class OnSuccess {
 public:
  explicit OnSuccess(F f) : f_(std::move(f)), exceptions_(std::uncaught_exceptions()) {}
  ~OnSuccess() {
    if (std::uncaught_exceptions() != exceptions_) return;
    try {
      f_();
    } catch (...) {
    }
  }
  OnSuccess(const OnSuccess&) = delete;
  OnSuccess& operator=(const OnSuccess&) = delete;

 private:
  F f_;
  int exceptions_;
};

}  // namespace weft
