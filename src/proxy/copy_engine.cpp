#include "proxy/copy_engine.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::proxy {

namespace {

constexpr uint64_t kValueSlots = 1024;

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(ErrorCode::UnhandledCuda, what + ": " + cudaGetErrorString(e));
}

}  // namespace

FifoMemory cuda_fifo_memory(int device) {
  FifoMemory m;
  m.alloc_pinned = [device](size_t bytes) {
    check(cudaSetDevice(device), "port-channel FIFO: cudaSetDevice");
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "port-channel FIFO: cudaHostAlloc");
    std::memset(p, 0, bytes);
    return p;
  };
  m.free_pinned = [](void* p) { cudaFreeHost(p); };
  m.device_pointer = [](void* p) {
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, p, 0), "port-channel FIFO: cudaHostGetDevicePointer");
    return d;
  };
  m.alloc_head = [device](size_t bytes) {
    check(cudaSetDevice(device), "port-channel FIFO: cudaSetDevice");
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "port-channel FIFO: cudaMalloc of its head");
    check(cudaMemset(p, 0, bytes), "port-channel FIFO: cudaMemset of its head");
    return p;
  };
  m.free_head = [](void* p) { cudaFree(p); };
  m.head_on_host = false;
  return m;
}

CopyEngineEndpoint::CopyEngineEndpoint(int device, std::string peer, double timeout_s)
    : device_(device),
      peer_(std::move(peer)),
      timeout_s_(config::wait_seconds(timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_TIMEOUT"))) {
  check(cudaSetDevice(device_), "copy-engine endpoint to " + peer_ + ": cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "copy-engine endpoint to " + peer_ + ": stream");
  stream_ = s;
  void* v = nullptr;
  check(cudaHostAlloc(&v, kValueSlots * sizeof(uint64_t), cudaHostAllocPortable), "copy-engine endpoint: signal values");
  values_ = static_cast<uint64_t*>(v);
}

CopyEngineEndpoint::~CopyEngineEndpoint() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));  // its copies read values_
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (values_ != nullptr) cudaFreeHost(values_);
  for (void* e : events_)
    if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void CopyEngineEndpoint::bind() {
  thread_local int bound = -1;
  if (bound != device_) {
    check(cudaSetDevice(device_), "copy-engine endpoint to " + peer_ + ": cudaSetDevice");
    bound = device_;
  }
}

void CopyEngineEndpoint::put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  bind();
  check(cudaMemcpyAsync(reinterpret_cast<char*>(dst.address) + dst_offset, src, bytes, cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream_)),
        "copy-engine put to " + peer_);
}

void CopyEngineEndpoint::write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) {
  bind();
  if (next_value_ == kValueSlots) flush(timeout_s_);  // every slot may still be read by a queued copy
  uint64_t* slot = values_ + next_value_++;
  *slot = value;
  // Same stream: the counter lands after every earlier put of this endpoint.
  check(cudaMemcpyAsync(reinterpret_cast<char*>(dst.address) + dst_offset, slot, sizeof(uint64_t), cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream_)),
        "copy-engine signal to " + peer_);
}

void CopyEngineEndpoint::flush(double timeout_s) {
  bind();
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (uint32_t spins = 0;; ++spins) {
    cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) check(e, "copies to " + peer_);
    if (std::chrono::steady_clock::now() > end)
      fail(ErrorCode::Timeout, "copies to " + peer_ + " did not finish within " + std::to_string(timeout_s) + " s");
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 4096 ? 50 : 1));
  }
  next_value_ = 0;
  landed_ = marked_;
}

void CopyEngineEndpoint::write_words(const RemoteMemory& dst, uint64_t dst_offset, const uint64_t* values, uint64_t n) {
  bind();
  check(cudaMemcpyAsync(reinterpret_cast<char*>(dst.address) + dst_offset, values, n * sizeof(uint64_t),
                        cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)),
        "copy-engine signal to " + peer_);
}

uint64_t CopyEngineEndpoint::mark(double timeout_s) {
  bind();
  if (marked_ - landed_ == kEvents) {  // the oldest event is still in use: wait for it, bounded
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!landed(landed_ + 1)) {
      if (std::chrono::steady_clock::now() > end)
        fail(ErrorCode::Timeout, "copies to " + peer_ + " did not finish within " + std::to_string(timeout_s) + " s");
      std::this_thread::yield();
    }
  }
  void*& ev = events_[marked_ % kEvents];
  if (ev == nullptr) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "copy-engine endpoint to " + peer_ + ": event");
    ev = e;
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(stream_)),
        "copy-engine endpoint to " + peer_ + ": event record");
  return ++marked_;
}

bool CopyEngineEndpoint::landed(uint64_t ticket) {
  while (landed_ < ticket && landed_ < marked_) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(events_[landed_ % kEvents]));
    if (e == cudaErrorNotReady) return false;
    check(e, "copies to " + peer_);
    ++landed_;
  }
  return landed_ >= ticket;
}

}  // namespace weft::proxy
