// Staging through page-locked host memory, for a network transport that cannot read GPU
// memory (a UCX built without CUDA support: UcxTransport::supports_cuda_memory() false).
//
// StagingEndpoint is a StagedEndpoint (proxy/staging_pipeline.hpp) whose copier is the
// GPU's copy engine: a put whose source is GPU memory is cut into chunks of `piece_bytes`,
// each copied into one of `pieces` page-locked buffers (cudaMemcpyAsync on a stream the
// proxy owns, a CUDA event per copy) and put from there as soon as its copy is done, in
// order, while the next chunk's copy runs; a buffer is reused once its chunk has landed.
// Host sources go straight through, in order with the staged chunks. Nothing waits for a
// whole message: the proxy holds a signal that follows staged chunks until they landed.
//
// The receiving side registers page-locked host memory (cudaHostAlloc, mapped) as the
// destination: the network writes it, and the receiving GPU reads it through its mapped
// device pointer (or copies it in).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "proxy/staging_pipeline.hpp"

namespace weft::proxy {

/// Page-locked buffers (cudaHostAlloc), freed on destruction: StagingEndpoint's first
/// base, so they outlive the pipeline that uses them.
struct PinnedBuffers {
  PinnedBuffers(uint64_t bytes, int n);
  ~PinnedBuffers();
  PinnedBuffers(const PinnedBuffers&) = delete;
  PinnedBuffers& operator=(const PinnedBuffers&) = delete;
  std::vector<char*> buffers;
};

class StagingEndpoint : private PinnedBuffers, public StagedEndpoint {
 public:
  /// `device`: the GPU whose memory the sources are. `timeout_s` bounds each wait for a
  /// free buffer, a copy or a flush (negative: WEFT_TIMEOUT).
  StagingEndpoint(std::shared_ptr<Endpoint> inner, int device, uint64_t piece_bytes = 2 << 20, int pieces = 8,
                    double timeout_s = -1);
};

}  // namespace weft::proxy
