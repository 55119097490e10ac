// What a proxy moves data over: an Endpoint to one peer, in-process memcpy here
// (HostEndpoint, for the CPU tests and ranks that are threads of one process), the
// network transport (net/ucx_transport.hpp) between processes and hosts.
//
// Every operation is posted in order. An endpoint guarantees that a write_u64 lands after
// every put posted before it (the port channel's signal after its data), and flush waits,
// bounded, until everything posted has landed, throwing a weft::Error naming the peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::proxy {

class Trace;

/// A peer's registered memory, as this rank knows it.
struct RemoteMemory {
  uint64_t address = 0;       ///< the peer's address of the first byte
  uint64_t bytes = 0;
  const void* key = nullptr;  ///< the transport's access key (a UCX rkey, valid while the transport lives), null in-process
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  /// "rank 3", for errors.
  virtual std::string peer() const = 0;
  /// Copies `bytes` from `src` to dst.address + dst_offset (bounds already checked).
  virtual void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) = 0;
  /// Writes `value` at dst.address + dst_offset once every earlier put has landed.
  virtual void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) = 0;
  /// Waits at most `timeout_s` until everything posted has landed.
  virtual void flush(double timeout_s) = 0;
  /// Lets the transport make progress (the proxy calls it while idle too).
  virtual void progress() {}

  // For callers that keep several transfers in flight (the partitioned progression engine).
  /// Writes `n` consecutive words from `values` at dst.address + dst_offset once every earlier
  /// put has landed (one signal for a range of flags); `values` must stay valid until then.
  /// Default: one write_u64 per word.
  virtual void write_words(const RemoteMemory& dst, uint64_t dst_offset, const uint64_t* values, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) write_u64(dst, dst_offset + i * sizeof(uint64_t), values[i]);
  }
  /// A ticket for everything posted so far; landed(ticket) says, without waiting, whether it
  /// has all landed. Default: flushes (waiting at most `timeout_s`), so every ticket has landed.
  virtual uint64_t mark(double timeout_s) {
    flush(timeout_s);
    return 0;
  }
  virtual bool landed(uint64_t /*ticket*/) { return true; }
  /// Several puts into `dst` posted at once (the engine's runs of one pass). Default: one put
  /// each; the copy-engine endpoint issues them as one cudaMemcpyBatchAsync.
  struct Put {
    uint64_t dst_offset = 0;
    const void* src = nullptr;
    uint64_t bytes = 0;
  };
  virtual void put_many(const RemoteMemory& dst, const Put* puts, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (puts[i].bytes > 0) put(dst, puts[i].dst_offset, puts[i].src, puts[i].bytes);
  }
  /// Several write_words into `dst` posted at once, each after every earlier put (the signals
  /// of one pass's runs). Default: one write_words each; the copy-engine endpoint writes up to
  /// kMaxMemOps words as one batch of stream memory operations.
  struct Words {
    uint64_t dst_offset = 0;
    const uint64_t* values = nullptr;
    uint64_t n = 0;
  };
  virtual void write_words_many(const RemoteMemory& dst, const Words* w, size_t n) {
    for (size_t i = 0; i < n; ++i) write_words(dst, w[i].dst_offset, w[i].values, w[i].n);
  }
  /// Writes `value` into this process's host-mapped word at device address `device_address`
  /// once everything posted before has landed (a stream write after the copies, so a host that
  /// polls the word learns of it without this thread). False: the endpoint cannot (nothing
  /// was posted; the caller stores the word itself once landed() says so).
  virtual bool write_mapped_word(uint64_t /*device_address*/, uint64_t /*value*/) { return false; }
  /// The end of a batch: write_words_many(dst, w, n), then, when `mapped_address` is not 0,
  /// write_mapped_word(mapped_address, mapped_value) (*mapped_written: whether it was posted),
  /// then mark(timeout_s), whose ticket it returns. The copy-engine endpoint posts all three
  /// as one batch of stream memory writes where it can (the mark: a write of the ticket into
  /// a page-locked word that landed() reads).
  virtual uint64_t signal_and_mark(const RemoteMemory& dst, const Words* w, size_t n, uint64_t mapped_address,
                                   uint64_t mapped_value, bool* mapped_written, double timeout_s) {
    write_words_many(dst, w, n);
    *mapped_written = mapped_address != 0 && write_mapped_word(mapped_address, mapped_value);
    return mark(timeout_s);
  }

  // For the proxy's pipelined signals (proxy/proxy.hpp, "Signals after landing").
  /// True where ordering a signal after earlier puts costs the transport a stall (UCX: a
  /// fence, which UCX 1.15+ implements as a flush before the next operation): the proxy
  /// then writes the signal with write_u64_landed once mark()/landed() show that the
  /// channel's puts have landed, and meanwhile keeps posting. Default false: write_u64.
  virtual bool signals_after_landing() const { return false; }
  /// Writes `value` at dst.address + dst_offset with no ordering against earlier puts (the
  /// caller knows they have landed, or that none need to precede it). Default: write_u64.
  virtual void write_u64_landed(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) {
    write_u64(dst, dst_offset, value);
  }
  /// False while the endpoint has operations in flight or its last progress() did work
  /// (the proxy keeps polling without backing off while any endpoint is busy).
  virtual bool idle() const { return true; }
  /// The proxy's trace recorder (proxy/trace.hpp), for endpoints with steps of their own
  /// (staging); called with null or a recorder before the proxy thread starts.
  virtual void attach_trace(Trace* /*trace*/) {}
};

/// Both ends in this process: put is a memcpy, write_u64 an atomic release store.
class HostEndpoint : public Endpoint {
 public:
  explicit HostEndpoint(std::string peer) : peer_(std::move(peer)) {}
  std::string peer() const override { return peer_; }
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override;
  void flush(double) override {}

 private:
  std::string peer_;
};

}  // namespace weft::proxy
