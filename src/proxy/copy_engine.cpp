#include "proxy/copy_engine.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "util/config.hpp"
#include "util/driver_entry.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::proxy {

namespace {

constexpr uint64_t kValueSlots = 1024;

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(ErrorCode::UnhandledCuda, what + ": " + cudaGetErrorString(e));
}

using BatchMemOp = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);
using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

BatchMemOp batch_mem_op() {
  static const BatchMemOp f = driver_entry<BatchMemOp>("cuStreamBatchMemOp");
  return f;
}
WriteValue64 write_value64() {
  static const WriteValue64 f = driver_entry<WriteValue64>("cuStreamWriteValue64");
  return f;
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
  memops_ok_ = config::get_bool("WEFT_PART_MEMOPS");
  // The word memory-op marks write their ticket into (optional: without it marks are events).
  void* t = nullptr;
  void* td = nullptr;
  if (cudaHostAlloc(&t, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess &&
      cudaHostGetDevicePointer(&td, t, 0) == cudaSuccess) {
    ticket_word_ = static_cast<uint64_t*>(t);
    *ticket_word_ = 0;
    ticket_device_ = reinterpret_cast<uint64_t>(td);
  } else {
    cudaGetLastError();
    if (t != nullptr) cudaFreeHost(t);
  }
}

CopyEngineEndpoint::~CopyEngineEndpoint() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));  // its copies read values_
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (values_ != nullptr) cudaFreeHost(values_);
  if (ticket_word_ != nullptr) cudaFreeHost(ticket_word_);
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
  tickets_.all_landed();
}

void CopyEngineEndpoint::write_words(const RemoteMemory& dst, uint64_t dst_offset, const uint64_t* values, uint64_t n) {
  bind();
  check(cudaMemcpyAsync(reinterpret_cast<char*>(dst.address) + dst_offset, values, n * sizeof(uint64_t),
                        cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)),
        "copy-engine signal to " + peer_);
}

uint64_t CopyEngineEndpoint::reserve(double timeout_s) {
  if (tickets_.full()) {  // the oldest ticket's slot is still in use: wait for it, bounded
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!landed(tickets_.landed() + 1)) {
      if (std::chrono::steady_clock::now() > end)
        fail(ErrorCode::Timeout, "copies to " + peer_ + " did not finish within " + std::to_string(timeout_s) + " s");
      std::this_thread::yield();
    }
  }
  return tickets_.next_slot();
}

uint64_t CopyEngineEndpoint::mark(double timeout_s) {
  bind();
  void*& ev = events_[reserve(timeout_s)];
  if (ev == nullptr) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "copy-engine endpoint to " + peer_ + ": event");
    ev = e;
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(stream_)),
        "copy-engine endpoint to " + peer_ + ": event record");
  return tickets_.issue(false);
}

bool CopyEngineEndpoint::landed(uint64_t ticket) {
  const uint64_t word = ticket_word_ != nullptr ? __atomic_load_n(ticket_word_, __ATOMIC_ACQUIRE) : 0;
  return tickets_.landed(ticket, word, [&](uint64_t slot) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(events_[slot]));
    if (e == cudaErrorNotReady) return false;
    check(e, "copies to " + peer_);
    return true;
  });
}

}  // namespace weft::proxy

namespace weft::proxy {

void CopyEngineEndpoint::put_many(const RemoteMemory& dst, const Put* puts, size_t n) {
  bind();
  dsts_.clear();
  srcs_.clear();
  sizes_.clear();
  for (size_t i = 0; i < n; ++i)
    if (puts[i].bytes > 0) {
      dsts_.push_back(reinterpret_cast<char*>(dst.address) + puts[i].dst_offset);
      srcs_.push_back(puts[i].src);
      sizes_.push_back(puts[i].bytes);
    }
  auto stream = static_cast<cudaStream_t>(stream_);
  if (dsts_.size() > 1 && batch_ok_) {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attr_index = 0;
    const cudaError_t e =
        cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), dsts_.size(), &attr, &attr_index, 1, stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue) check(e, "copy-engine puts to " + peer_);
    cudaGetLastError();
    batch_ok_ = false;
    WEFT_LOG(Info, "PROXY", "copy-engine puts to " << peer_ << ": cudaMemcpyBatchAsync refused ("
                                                   << cudaGetErrorString(e) << "); one cudaMemcpyAsync per put");
  }
  for (size_t i = 0; i < dsts_.size(); ++i)
    check(cudaMemcpyAsync(dsts_[i], srcs_[i], sizes_[i], cudaMemcpyDefault, stream), "copy-engine put to " + peer_);
}

unsigned CopyEngineEndpoint::append_words(const RemoteMemory& dst, const Words* w, size_t n, unsigned k) {
  ops_.resize(kMaxMemOps * sizeof(CUstreamBatchMemOpParams));
  auto* ops = reinterpret_cast<CUstreamBatchMemOpParams*>(ops_.data());
  for (size_t i = 0; i < n; ++i)
    for (uint64_t j = 0; j < w[i].n; ++j, ++k) {
      ops[k] = CUstreamBatchMemOpParams{};
      ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      ops[k].writeValue.address = dst.address + w[i].dst_offset + j * sizeof(uint64_t);
      ops[k].writeValue.value64 = w[i].values[j];
      ops[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;  // fenced after the copies before it
    }
  return k;
}

void CopyEngineEndpoint::write_words_many(const RemoteMemory& dst, const Words* w, size_t n) {
  bind();
  uint64_t words = 0;
  for (size_t i = 0; i < n; ++i) words += w[i].n;
  const BatchMemOp f = memops_ok_ ? batch_mem_op() : nullptr;
  if (f != nullptr && words > 0 && words <= kMaxMemOps) {
    const unsigned k = append_words(dst, w, n, 0);
    const CUresult r = f(static_cast<CUstream>(stream_), k, reinterpret_cast<CUstreamBatchMemOpParams*>(ops_.data()), 0);
    if (r == CUDA_SUCCESS) return;
    memops_ok_ = false;
    WEFT_LOG(Info, "PROXY", "copy-engine signals to " << peer_ << ": cuStreamBatchMemOp refused (CUresult "
                                                      << static_cast<int>(r) << "); one page-locked copy per run");
  }
  for (size_t i = 0; i < n; ++i) write_words(dst, w[i].dst_offset, w[i].values, w[i].n);
}

uint64_t CopyEngineEndpoint::signal_and_mark(const RemoteMemory& dst, const Words* w, size_t n, uint64_t mapped_address,
                                             uint64_t mapped_value, bool* mapped_written, double timeout_s) {
  bind();
  uint64_t words = 0;
  for (size_t i = 0; i < n; ++i) words += w[i].n;
  const BatchMemOp f = memops_ok_ && ticket_device_ != 0 ? batch_mem_op() : nullptr;
  if (f == nullptr || words + 2 > kMaxMemOps)
    return Endpoint::signal_and_mark(dst, w, n, mapped_address, mapped_value, mapped_written, timeout_s);
  reserve(timeout_s);
  unsigned k = append_words(dst, w, n, 0);
  auto* ops = reinterpret_cast<CUstreamBatchMemOpParams*>(ops_.data());
  auto write = [&](uint64_t address, uint64_t value) {
    ops[k] = CUstreamBatchMemOpParams{};
    ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[k].writeValue.address = address;
    ops[k].writeValue.value64 = value;
    ops[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    ++k;
  };
  if (mapped_address != 0) write(mapped_address, mapped_value);
  write(ticket_device_, tickets_.next_ticket());  // last: the ticket lands after everything of the batch
  const CUresult r = f(static_cast<CUstream>(stream_), k, ops, 0);
  if (r != CUDA_SUCCESS) {
    memops_ok_ = false;
    WEFT_LOG(Info, "PROXY", "copy-engine signals to " << peer_ << ": cuStreamBatchMemOp refused (CUresult "
                                                      << static_cast<int>(r) << "); page-locked copies and events");
    return Endpoint::signal_and_mark(dst, w, n, 0, 0, mapped_written, timeout_s);
  }
  *mapped_written = mapped_address != 0;
  return tickets_.issue(true);
}

bool CopyEngineEndpoint::write_mapped_word(uint64_t device_address, uint64_t value) {
  bind();
  const WriteValue64 f = memops_ok_ ? write_value64() : nullptr;
  if (f == nullptr) return false;
  const CUresult r = f(static_cast<CUstream>(stream_), device_address, value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r == CUDA_SUCCESS) return true;
  memops_ok_ = false;
  WEFT_LOG(Info, "PROXY", "copy-engine endpoint to " << peer_ << ": cuStreamWriteValue64 refused (CUresult "
                                                     << static_cast<int>(r) << "); the engine stores its words itself");
  return false;
}

}  // namespace weft::proxy
