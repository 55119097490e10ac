#include "proxy/staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::proxy {

namespace {
void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(ErrorCode::UnhandledCuda, what + ": " + cudaGetErrorString(e));
}
}  // namespace

namespace {
/// Copies on one non-blocking stream, each followed by an event of a ring as long as the
/// buffers (at most that many staged copies are in flight).
class CudaCopier : public Copier {
 public:
  CudaCopier(int device, size_t events, std::string who) : device_(device), who_(std::move(who)) {
    check(cudaSetDevice(device_), "staging for " + who_ + ": cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "staging for " + who_ + ": stream");
    events_.resize(events, nullptr);
    for (auto& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "staging for " + who_ + ": event");
  }
  ~CudaCopier() override {
    cudaStreamSynchronize(stream_);
    for (auto e : events_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
    cudaGetLastError();
  }
  uint64_t start(void* dst, const void* src, uint64_t bytes) override {
    check(cudaSetDevice(device_), "staging for " + who_ + ": cudaSetDevice");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "staging copy for " + who_);
    const uint64_t token = next_++;
    check(cudaEventRecord(events_[token % events_.size()], stream_), "staging copy for " + who_ + ": event");
    return token;
  }
  bool done(uint64_t token) override {
    const cudaError_t e = cudaEventQuery(events_[token % events_.size()]);
    if (e == cudaErrorNotReady) return false;
    check(e, "staging copy for " + who_);
    return true;
  }

 private:
  int device_;
  std::string who_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  uint64_t next_ = 0;
};
}  // namespace

namespace {
bool on_gpu(const void* p) {
  cudaPointerAttributes attr{};
  const bool gpu = cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice;
  if (!gpu) cudaGetLastError();
  return gpu;
}

std::shared_ptr<Endpoint> checked(std::shared_ptr<Endpoint> inner, uint64_t piece_bytes, int pieces) {
  if (!inner || piece_bytes == 0 || pieces < 1)
    fail(ErrorCode::InvalidArgument, "staging endpoint: needs an inner endpoint, a piece size and at least one buffer");
  return inner;
}
}  // namespace

PinnedBuffers::PinnedBuffers(uint64_t bytes, int n) {
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      for (char* b : buffers) cudaFreeHost(b);
      buffers.clear();
      check(e, "staging endpoint: page-locked buffer of " + std::to_string(bytes) + " bytes");
    }
    buffers.push_back(static_cast<char*>(p));
  }
}

PinnedBuffers::~PinnedBuffers() {
  for (char* b : buffers) cudaFreeHost(b);
}

StagingEndpoint::StagingEndpoint(std::shared_ptr<Endpoint> inner, int device, uint64_t piece_bytes, int pieces,
                                     double timeout_s)
    : PinnedBuffers(piece_bytes, std::max(pieces, 0)),
      StagedEndpoint(checked(inner, piece_bytes, pieces),
                       std::make_unique<CudaCopier>(device, static_cast<size_t>(std::max(pieces, 1)), inner ? inner->peer() : ""),
                       buffers, piece_bytes,
                       config::wait_seconds(timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_TIMEOUT")), on_gpu) {}

}  // namespace weft::proxy
