// The staging pipeline: puts whose source the network cannot read (GPU memory, for a UCX
// without CUDA support) go through a ring of page-locked buffers in chunks, so that the
// copy of chunk k+1 into a buffer runs while chunk k is on the wire and nothing waits for a
// whole message. Host-only (the copies are behind a Copier: CUDA copy engines in
// proxy/staging.hpp, a fake in the CPU tests), driven by the proxy thread alone.
//
//   put        cuts the put into chunks of at most `chunk_bytes`; each takes the next free
//              buffer (progressing, bounded, while none is free) and starts its copy, or
//              goes as it is where the source is readable (`direct`). Returns at once.
//   progress   posts chunks to the inner endpoint strictly in order, each once its copy
//              is done and every earlier chunk is posted (copies may complete in any
//              order); marks the inner endpoint after each chunk it posts; releases
//              chunks in order once their mark has landed, returning their buffers.
//   mark / landed  a ticket for every chunk enqueued so far; landed once all of them are
//              released (posted and landed), which is when the proxy may write a signal
//              that follows them (Endpoint::signals_after_landing).
//   post_all / drain  wait, bounded, until every chunk is posted / released.
//
// A buffer is reused only after the inner endpoint says its chunk landed, so the network
// never reads a buffer being refilled. Errors are weft::Error naming `who` (the peer).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proxy/endpoint.hpp"

namespace weft::proxy {

class Trace;

/// Asynchronous copies into staging buffers.
class Copier {
 public:
  virtual ~Copier() = default;
  /// Starts copying `bytes` from `src` to `dst`; returns a token for done().
  virtual uint64_t start(void* dst, const void* src, uint64_t bytes) = 0;
  /// True once copy `token` has completed (copies may complete in any order); throws on failure.
  virtual bool done(uint64_t token) = 0;
};

class StagingPipeline {
 public:
  /// `buffers`: page-locked, each `chunk_bytes` long (at least one). `timeout_s` bounds every wait.
  StagingPipeline(Endpoint& inner, Copier& copier, std::vector<char*> buffers, uint64_t chunk_bytes,
                  double timeout_s, std::string who);

  /// Enqueues a put (bounds already checked). `direct`: the inner endpoint can read
  /// `src` itself, no copy (it still leaves in order).
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes, bool direct);
  /// Posts what can be posted, releases what landed; true while anything is in flight.
  bool progress();
  uint64_t mark() const { return enqueued_; }
  bool landed(uint64_t ticket);
  bool empty() const { return chunks_.empty(); }
  void post_all(double timeout_s);
  void drain(double timeout_s);
  void set_trace(Trace* t) { trace_ = t; }

  // Counters (tests).
  uint64_t enqueued() const { return enqueued_; }
  uint64_t posted() const { return posted_; }
  uint64_t released() const { return released_; }
  size_t free_buffers() const { return free_.size(); }
  /// The most chunks posted and not yet landed at once, and the chunks that went on the
  /// wire while the next chunk's copy was under way (copies overlapping the network).
  uint64_t max_on_wire() const { return max_on_wire_; }
  uint64_t overlapped_copies() const { return overlapped_; }

 private:
  struct Chunk {
    uint64_t seq = 0;
    int buffer = -1;          ///< index in buffers_; -1: direct
    const void* src = nullptr;  ///< what the inner endpoint reads (a buffer, or the source itself)
    uint64_t token = 0;       ///< the copy's
    RemoteMemory dst;
    uint64_t dst_offset = 0, bytes = 0;
    bool posted = false;
    uint64_t inner_ticket = 0;
  };
  void wait_until(const char* what, double timeout_s, bool (StagingPipeline::*done)() const);
  bool all_posted() const { return posted_ == enqueued_; }
  bool has_free() const { return !free_.empty(); }
  bool none_left() const { return chunks_.empty(); }

  Endpoint& inner_;
  Copier& copier_;
  std::vector<char*> buffers_;
  uint64_t chunk_bytes_;
  double timeout_s_;
  std::string who_;
  std::deque<int> free_;       // buffer indices, in the order they came back
  std::deque<Chunk> chunks_;   // unreleased, oldest first
  uint64_t enqueued_ = 0, posted_ = 0, released_ = 0;
  uint64_t max_on_wire_ = 0, overlapped_ = 0;
  Trace* trace_ = nullptr;
};

/// An Endpoint that stages the puts `needs_staging` says the inner endpoint cannot read
/// through a StagingPipeline (proxy/staging.hpp's StagingEndpoint: GPU sources, CUDA
/// copies; the CPU tests: a host Copier). Signals: held by the proxy until the staged chunks
/// before them landed (signals_after_landing), or, through write_u64, after every chunk is
/// posted, ordered by the inner endpoint. Flush waits for every chunk, then the inner one.
class StagedEndpoint : public Endpoint {
 public:
  StagedEndpoint(std::shared_ptr<Endpoint> inner, std::unique_ptr<Copier> copier, std::vector<char*> buffers,
                   uint64_t chunk_bytes, double timeout_s, std::function<bool(const void*)> needs_staging);
  std::string peer() const override { return inner_->peer(); }
  void put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) override {
    pipeline_->put(dst, dst_offset, src, bytes, !needs_staging_(src));
  }
  void write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override {
    pipeline_->post_all(timeout_s_);
    inner_->write_u64(dst, dst_offset, value);
  }
  void flush(double timeout_s) override;
  void progress() override {
    inner_->progress();
    pipeline_->progress();
  }
  uint64_t mark(double) override { return pipeline_->mark(); }
  bool landed(uint64_t ticket) override { return pipeline_->landed(ticket); }
  bool signals_after_landing() const override { return true; }
  void write_u64_landed(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) override {
    inner_->write_u64_landed(dst, dst_offset, value);
  }
  bool idle() const override { return pipeline_->empty() && inner_->idle(); }
  void attach_trace(Trace* t) override { pipeline_->set_trace(t); }
  const StagingPipeline& pipeline() const { return *pipeline_; }

 protected:
  std::shared_ptr<Endpoint> inner_;
  std::unique_ptr<Copier> copier_;
  double timeout_s_;
  std::function<bool(const void*)> needs_staging_;
  std::unique_ptr<StagingPipeline> pipeline_;
};

}  // namespace weft::proxy
