// Communicator's memory windows (runtime/windows.hpp).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "exec/ce_runner.hpp"
#include "exec/device_memory.hpp"
#include "plan/ce_plan.hpp"
#include "runtime/communicator.hpp"
#include "runtime/window_rules.hpp"
#include "util/cuda_check.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

/// What each rank tells the others when a window is registered.
struct WindowRecord {
  uint32_t refusal = 0;    ///< WindowRefusal
  int32_t flags = 0;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint32_t shareable = 0;  ///< `handle` holds an IPC handle of the allocation
  uint32_t pad = 0;
  cudaIpcMemHandle_t handle{};
  uint64_t alloc = 0, alloc_bytes = 0;  ///< the allocation holding the window, in its process
  uint64_t offset = 0;                  ///< the window's start in it
};

WindowRecord local_record(void* ptr, uint64_t bytes, int flags, uint64_t seq) {
  WindowRecord r;
  r.flags = flags;
  r.seq = seq;
  r.bytes = bytes;
  uint64_t base = 0, size = 0;
  bool device = false;
  if (ptr != nullptr) {
    try {
      device = exec::allocation_range(ptr, &base, &size);
    } catch (const Error&) {
      device = false;
    }
  }
  const uint64_t p = reinterpret_cast<uint64_t>(ptr);
  if (ptr == nullptr || bytes == 0) r.refusal = static_cast<uint32_t>(WindowRefusal::NullOrEmpty);
  else if (flags != kWinDefault && flags != kWinSymmetric) r.refusal = static_cast<uint32_t>(WindowRefusal::BadFlags);
  else if (!device) r.refusal = static_cast<uint32_t>(WindowRefusal::NotDevice);
  else if (bytes > size - (p - base)) r.refusal = static_cast<uint32_t>(WindowRefusal::PastAllocation);
  if (r.refusal != 0) return r;
  r.alloc = base;
  r.alloc_bytes = size;
  r.offset = p - base;
  r.shareable = cudaIpcGetMemHandle(&r.handle, reinterpret_cast<void*>(base)) == cudaSuccess ? 1 : 0;
  cudaGetLastError();
  return r;
}

}  // namespace

weftWindow* Communicator::register_window(void* ptr, uint64_t bytes, int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  RelaxedCapture relaxed;
  DeviceGuard guard(device_);
  const size_t R = static_cast<size_t>(nranks_), me = static_cast<size_t>(rank_);
  std::vector<WindowRecord> all(R);
  all[me] = local_record(ptr, bytes, flags, windows_registered_);
  // Every rank takes part even with bad arguments: the verdict names it on every rank.
  boot_->allgather(all.data(), sizeof(WindowRecord), config::wait_seconds(timeout_s_));
  std::vector<WindowClaim> claims(R);
  for (size_t q = 0; q < R; ++q) {
    const WindowRecord& r = all[q];
    // Bytes from other processes: a window that claims to run past its allocation is refused
    // (every rank sees the same records, so every rank fails alike).
    if (r.refusal == 0 && (r.bytes > r.alloc_bytes || r.offset > r.alloc_bytes - r.bytes))
      fail(ErrorCode::Remote, "rank " + std::to_string(rank_) + ": rank " + std::to_string(q) +
                                  " sent a window record that runs past its allocation; no rank registered the window");
    claims[q] = WindowClaim{static_cast<WindowRefusal>(r.refusal), r.flags, r.seq, r.bytes, r.shareable != 0};
  }
  const WindowVerdict v = judge_window(claims, !net_ && nranks_ >= 2 && nranks_ <= ce::kMaxRanks);
  if (v.code != ErrorCode::Success)
    fail(v.code, "rank " + std::to_string(rank_) + ": window registration refused: " + v.message);
  auto w = std::make_unique<weftWindow>();
  w->id = windows_registered_++;
  w->flags = flags;
  w->ptr = static_cast<char*>(ptr);
  w->bytes = bytes;
  if (v.map) {
    // Map every peer's window now; a rank that cannot tells the others, and then no rank
    // uses copy engines on this window (its collectives run on the SM path).
    std::vector<char*> peer(R, nullptr);
    std::string error;
    try {
      CeRunner& ce = ensure_ce();
      for (size_t q = 0; q < R; ++q) {
        const WindowRecord& r = all[q];
        peer[q] = q == me ? w->ptr
                          : ce.map_peer(static_cast<int>(q), r.handle, r.alloc, r.offset + r.bytes, r.alloc_bytes) +
                                r.offset;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::vector<uint32_t> oks(R);
    oks[me] = error.empty() ? 1 : 0;
    boot_->allgather(oks.data(), sizeof(uint32_t), config::wait_seconds(timeout_s_));
    w->mapped = true;
    for (size_t q = 0; q < R; ++q) w->mapped = w->mapped && oks[q] != 0;
    if (w->mapped) {
      w->peer = std::move(peer);
      for (size_t q = 0; q < R; ++q) w->peer_bytes.push_back(all[q].bytes);
    } else {
      WEFT_LOG(Info, "WIN", "rank " << rank_ << ": window " << w->id << " is not mapped by every rank"
                                    << (error.empty() ? "" : " (" + error + ")")
                                    << "; its collectives run on the SM path");
    }
  }
  WEFT_LOG(Info, "WIN", "rank " << rank_ << ": window " << w->id << " of " << bytes << " bytes registered ("
                                << (flags & kWinSymmetric ? "symmetric" : "default")
                                << (w->mapped ? ", mapped by every rank)" : ", not mapped)"));
  weftWindow* handle = w.get();
  windows_[handle] = std::move(w);
  return handle;
}

void Communicator::deregister_window(weftWindow* w) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(w);  // the handle is looked up, never dereferenced first
  if (it == windows_.end())
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) +
                                         ": the window is not registered with this communicator (deregistered "
                                         "already, or another communicator's)");
  DeviceGuard guard(device_);
  for (const auto& [stream, ev] : w->uses) {
    const cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) {
      char where[32];
      std::snprintf(where, sizeof(where), "%p", static_cast<void*>(stream));
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": window " + std::to_string(w->id) +
                                        " is still used by a collective in flight on stream " + where +
                                        "; wait for that stream (cudaStreamSynchronize), then deregister it");
    }
    if (e != cudaSuccess) cudaGetLastError();  // a failed stream: the window is no longer in use
  }
  windows_.erase(it);
}

const weftWindow* Communicator::window_of(const void* ptr, uint64_t bytes) const {
  const uint64_t p = reinterpret_cast<uint64_t>(ptr);
  const weftWindow* best = nullptr;
  for (const auto& [h, w] : windows_) {
    const uint64_t b = reinterpret_cast<uint64_t>(w->ptr);
    if (p >= b && p - b <= w->bytes && bytes <= w->bytes - (p - b) && (best == nullptr || w->id < best->id))
      best = w.get();
  }
  return best;
}

void Communicator::note_window_use(const void* send, uint64_t send_bytes, const void* recv, uint64_t recv_bytes,
                                   cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;  // a graph's launches are not tracked (docs/c-api.md)
  }
  auto overlaps = [](const weftWindow& w, const void* p, uint64_t n) {
    const uint64_t a = reinterpret_cast<uint64_t>(p), b = reinterpret_cast<uint64_t>(w.ptr);
    return p != nullptr && n > 0 && a < b + w.bytes && b < a + n;
  };
  for (auto& [h, w] : windows_) {
    if (!overlaps(*w, send, send_bytes) && !overlaps(*w, recv, recv_bytes)) continue;
    cudaEvent_t& ev = w->uses[stream];
    if (ev == nullptr && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      w->uses.erase(stream);
      WEFT_LOG(Warn, "WIN", "rank " << rank_ << ": cannot make an event for window " << w->id
                                    << "; its deregistration cannot see this call");
      continue;
    }
    if (cudaEventRecord(ev, stream) != cudaSuccess) cudaGetLastError();
  }
}

}  // namespace weft
