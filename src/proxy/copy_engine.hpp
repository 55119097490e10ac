// Port channels within a host: the proxy moves data with the GPU's copy engines
// (cudaMemcpyAsync on a stream the proxy owns), so no thread block of the kernel copies.
//
// CopyEngineConnection puts into a peer's registered buffer as mapped into this process
// (CUDA IPC or peer access; RemoteMemory::address is that mapping), writes signal counters
// with a copy ordered after the data on the same stream, and flushes by polling
// cudaStreamQuery until its deadline. It never makes a stream wait on a flag
// (cudaStreamWaitValue cannot time out): every wait is the device's bounded spin or the
// proxy's bounded poll, which keeps weft's no-hang rule. The kernels that post triggers
// run on the caller's stream and can be captured in CUDA graphs; the proxy's copies are
// not part of the graph, they follow the triggers at replay.
//
// cuda_fifo_memory puts the FIFO in mapped page-locked memory (cudaHostAlloc) and its head
// in device memory, for triggers posted by GPU code.
#pragma once

#include <cstdint>
#include <string>

#include "proxy/connection.hpp"
#include "proxy/fifo.hpp"

namespace weft::proxy {

/// The FIFO's memory for producers on CUDA device `device`.
FifoMemory cuda_fifo_memory(int device);

class CopyEngineConnection : public Connection {
 public:
  /// Copies issued from `device` (the proxy's GPU) toward `peer` ("rank 1 (GPU 1)").
  /// `timeout_s` bounds the flush it makes itself when its ring of signal values is used
  /// up (negative: WEFT_TIMEOUT).
  CopyEngineConnection(int device, std::string peer, double timeout_s = -1);
  ~CopyEngineConnection() override;
  std::string peer() const override { return peer_; }
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override;
  void flush(double timeout_s) override;

 private:
  void bind();  // sets the proxy thread's device
  int device_;
  std::string peer_;
  double timeout_s_;
  void* stream_ = nullptr;     // cudaStream_t, non-blocking, owned
  uint64_t* values_ = nullptr; // page-locked ring of signal values
  uint64_t next_value_ = 0;    // ring slots used since the last flush
};

}  // namespace weft::proxy
