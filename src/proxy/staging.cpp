#include "proxy/staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::proxy {

namespace {
void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(ErrorCode::UnhandledCuda, what + ": " + cudaGetErrorString(e));
}
}  // namespace

StagingEndpoint::StagingEndpoint(std::shared_ptr<Endpoint> inner, int device, uint64_t piece_bytes, int pieces,
                                     double timeout_s)
    : inner_(std::move(inner)),
      device_(device),
      piece_bytes_(piece_bytes),
      timeout_s_(config::wait_seconds(timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_TIMEOUT"))) {
  if (!inner_ || piece_bytes_ == 0 || pieces < 1)
    fail(ErrorCode::InvalidArgument, "staging endpoint: needs an inner endpoint, a piece size and at least one buffer");
  check(cudaSetDevice(device_), "staging endpoint to " + inner_->peer() + ": cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "staging endpoint to " + inner_->peer() + ": stream");
  stream_ = s;
  for (int i = 0; i < pieces; ++i) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, piece_bytes_, cudaHostAllocPortable), "staging endpoint: page-locked buffer");
    buffers_.push_back(static_cast<char*>(p));
  }
}

StagingEndpoint::~StagingEndpoint() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  for (char* b : buffers_) cudaFreeHost(b);
}

void StagingEndpoint::wait_stream() {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  for (uint32_t spins = 0;; ++spins) {
    cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, "staging copy for " + inner_->peer());
    if (std::chrono::steady_clock::now() > end)
      fail(ErrorCode::Timeout, "staging copy for " + inner_->peer() + " did not finish within " + std::to_string(timeout_s_) + " s");
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 4096 ? 50 : 1));
  }
}

void StagingEndpoint::put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  cudaPointerAttributes attr{};
  const bool gpu = cudaPointerGetAttributes(&attr, src) == cudaSuccess && attr.type == cudaMemoryTypeDevice;
  if (!gpu) {  // host memory: the network reads it directly
    cudaGetLastError();
    inner_->put(dst, dst_offset, src, bytes);
    return;
  }
  check(cudaSetDevice(device_), "staging endpoint: cudaSetDevice");
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(piece_bytes_, bytes - done);
    if (used_ == buffers_.size()) flush(timeout_s_);  // every buffer may still be read by the network
    char* stage = buffers_[used_++];
    check(cudaMemcpyAsync(stage, static_cast<const char*>(src) + done, n, cudaMemcpyDeviceToHost,
                          static_cast<cudaStream_t>(stream_)),
          "staging copy for " + inner_->peer());
    wait_stream();
    inner_->put(dst, dst_offset + done, stage, n);
    done += n;
  }
}

void StagingEndpoint::flush(double timeout_s) {
  inner_->flush(timeout_s);
  used_ = 0;
}

}  // namespace weft::proxy
