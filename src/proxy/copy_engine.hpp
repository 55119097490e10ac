// Port channels within a host: the proxy moves data with the GPU's copy engines
// (cudaMemcpyAsync on a stream the proxy owns), so no thread block of the kernel copies.
//
// CopyEngineEndpoint puts into a peer's registered buffer as mapped into this process
// (CUDA IPC or peer access; RemoteMemory::address is that mapping), writes signal counters
// with a copy ordered after the data on the same stream, and flushes by polling
// cudaStreamQuery until its deadline. It never makes a stream wait on a flag
// (cudaStreamWaitValue cannot time out): every wait is the device's bounded spin or the
// proxy's bounded poll, which keeps weft's no-hang rule. The kernels that post triggers
// run on the caller's stream and can be captured in CUDA graphs; the proxy's copies are
// not part of the graph, they follow the triggers at replay.
//
// The partitioned progression engine posts a pass's runs together: put_many (one
// cudaMemcpyBatchAsync), write_words_many (the runs' flag words as one batch of stream
// memory writes, cuStreamBatchMemOp, instead of one page-locked copy per run) and
// write_mapped_word (a stream write of a host-mapped word after the copies: the request's
// done word). The driver functions are reached through cudaGetDriverEntryPointByVersion (no
// link against libcuda); a driver that refuses them leaves the copies of before.
//
// cuda_fifo_memory puts the FIFO in mapped page-locked memory (cudaHostAlloc) and its head
// in device memory, for triggers posted by GPU code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proxy/endpoint.hpp"
#include "proxy/fifo.hpp"
#include "proxy/tickets.hpp"

namespace weft::proxy {

/// The FIFO's memory for producers on CUDA device `device`.
FifoMemory cuda_fifo_memory(int device);

class CopyEngineEndpoint : public Endpoint {
 public:
  /// Copies issued from `device` (the proxy's GPU) toward `peer` ("rank 1 (GPU 1)").
  /// `timeout_s` bounds the flush it makes itself when its ring of signal values is used
  /// up (negative: WEFT_TIMEOUT).
  CopyEngineEndpoint(int device, std::string peer, double timeout_s = -1);
  ~CopyEngineEndpoint() override;
  std::string peer() const override { return peer_; }
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override;
  void flush(double timeout_s) override;
  /// One copy of `n` words, after every earlier put on the stream (`values`: page-locked,
  /// else CUDA copies them synchronously).
  void write_words(const RemoteMemory& dst, uint64_t dst_offset, const uint64_t* values, uint64_t n) override;
  /// A CUDA event recorded on the stream (a ring of kEvents; when it is full, the oldest is
  /// waited for, at most the endpoint's timeout); landed queries the events in order.
  uint64_t mark(double timeout_s) override;
  bool landed(uint64_t ticket) override;
  /// n > 1: one cudaMemcpyBatchAsync (a driver that refuses it: one cudaMemcpyAsync each
  /// from then on, logged once).
  void put_many(const RemoteMemory& dst, const Put* puts, size_t n) override;
  /// Up to kMaxMemOps words in all: one cuStreamBatchMemOp of 64-bit stream writes (each
  /// fenced after the copies before it on the stream), no copy engine and no page-locked
  /// source; more words, or a driver that refuses memory operations: write_words each.
  void write_words_many(const RemoteMemory& dst, const Words* w, size_t n) override;
  /// cuStreamWriteValue64 on the stream (false where the driver refuses stream memory operations).
  bool write_mapped_word(uint64_t device_address, uint64_t value) override;
  /// Flags, the mapped word and the mark in one cuStreamBatchMemOp (the mark: the ticket
  /// written into a page-locked mapped word; landed reads it, no event) when the driver takes
  /// stream memory operations and the words fit kMaxMemOps; else the default's calls.
  uint64_t signal_and_mark(const RemoteMemory& dst, const Words* w, size_t n, uint64_t mapped_address,
                           uint64_t mapped_value, bool* mapped_written, double timeout_s) override;
  static constexpr uint64_t kEvents = TicketRing::kSlots;
  static constexpr size_t kMaxMemOps = 128;

 private:
  void bind();  // sets the proxy thread's device
  int device_;
  std::string peer_;
  double timeout_s_;
  void* stream_ = nullptr;     // cudaStream_t, non-blocking, owned
  uint64_t* values_ = nullptr; // page-locked ring of signal values
  uint64_t next_value_ = 0;    // ring slots used since the last flush
  void* events_[kEvents] = {}; // cudaEvent_t, created on first mark
  TicketRing tickets_;         // events and memory-op marks (proxy/tickets.hpp)
  /// Waits (at most timeout_s) while kEvents tickets are outstanding; the slot of the next ticket.
  uint64_t reserve(double timeout_s);
  /// Appends write-value ops for `n` word ranges to ops_ from index k; returns the new count.
  unsigned append_words(const RemoteMemory& dst, const Words* w, size_t n, unsigned k);
  uint64_t* ticket_word_ = nullptr;  // page-locked, mapped: the last ticket a memory-op mark wrote
  uint64_t ticket_device_ = 0;       // its device address (0: marks are events only)
  bool batch_ok_ = true, memops_ok_ = true;  // cleared when the driver refuses one (then per copy / memcpy)
  std::vector<void*> dsts_;              // put_many's and write_words_many's arrays, kept
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
  std::vector<unsigned char> ops_;       // CUstreamBatchMemOpParams x kMaxMemOps
};

}  // namespace weft::proxy
