// Staging through page-locked host memory, for a network transport that cannot read GPU
// memory (a UCX built without CUDA support: UcxTransport::supports_cuda_memory() false).
//
// StagingEndpoint wraps the network endpoint to one peer. A put whose source is GPU
// memory is cut into pieces of `piece_bytes`; each piece is copied by a copy engine into
// one of `pieces` page-locked staging buffers (cudaMemcpyAsync on a stream the proxy owns,
// waited by bounded polling), then put from there by the inner endpoint. A staging buffer
// is reused only after the inner endpoint has been flushed, so a piece is never
// overwritten while the network still reads it. Signals and flushes go straight to the
// inner endpoint (ordering is the inner endpoint's).
//
// The receiving side registers page-locked host memory (cudaHostAlloc, mapped) as the
// destination: the network writes it, and the receiving GPU reads it through its mapped
// device pointer (or copies it in).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proxy/endpoint.hpp"

namespace weft::proxy {

class StagingEndpoint : public Endpoint {
 public:
  /// `device`: the GPU whose memory the sources are. `timeout_s` bounds each staging copy
  /// and the flushes it makes to free buffers (negative: WEFT_TIMEOUT).
  StagingEndpoint(std::shared_ptr<Endpoint> inner, int device, uint64_t piece_bytes = 4 << 20, int pieces = 4,
                    double timeout_s = -1);
  ~StagingEndpoint() override;
  std::string peer() const override { return inner_->peer(); }
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override {
    inner_->write_u64(dst, dst_offset, value);
  }
  void flush(double timeout_s) override;
  void progress() override { inner_->progress(); }

 private:
  void wait_stream();
  std::shared_ptr<Endpoint> inner_;
  int device_;
  uint64_t piece_bytes_;
  double timeout_s_;
  void* stream_ = nullptr;        // cudaStream_t
  std::vector<char*> buffers_;    // page-locked
  size_t used_ = 0;               // buffers filled since the last flush
};

}  // namespace weft::proxy
