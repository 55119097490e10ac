#include "proxy/staging_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "proxy/trace.hpp"
#include "util/error.hpp"

namespace weft::proxy {

StagingPipeline::StagingPipeline(Endpoint& inner, Copier& copier, std::vector<char*> buffers, uint64_t chunk_bytes,
                                 double timeout_s, std::string who)
    : inner_(inner),
      copier_(copier),
      buffers_(std::move(buffers)),
      chunk_bytes_(chunk_bytes),
      timeout_s_(timeout_s),
      who_(std::move(who)) {
  if (buffers_.empty() || chunk_bytes_ == 0)
    fail(ErrorCode::InvalidArgument, "staging for " + who_ + ": needs at least one buffer and a chunk size");
  for (int i = 0; i < static_cast<int>(buffers_.size()); ++i) free_.push_back(i);
}

void StagingPipeline::wait_until(const char* what, double timeout_s, bool (StagingPipeline::*done)() const) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (uint32_t spins = 0; !(this->*done)(); ++spins) {
    inner_.progress();
    progress();
    if ((this->*done)()) return;
    if (std::chrono::steady_clock::now() > end)
      fail(ErrorCode::Timeout, "staging for " + who_ + ": " + what + " within " + std::to_string(timeout_s) + " s (" +
                                   std::to_string(posted_ - released_) + " chunks on the wire, " +
                                   std::to_string(enqueued_ - posted_) + " not yet posted): " + who_ +
                                   " is stalled or unreachable, or a staging copy hangs");
    if (spins > 1024) std::this_thread::yield();
  }
}

void StagingPipeline::put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes, bool direct) {
  for (uint64_t done = 0; done < bytes;) {
    Chunk c;
    c.seq = enqueued_;
    c.dst = dst;
    c.dst_offset = dst_offset + done;
    c.bytes = direct ? bytes - done : std::min(chunk_bytes_, bytes - done);
    const char* from = static_cast<const char*>(src) + done;
    if (direct) {
      c.src = from;
    } else {
      if (free_.empty()) wait_until("no staging buffer came free", timeout_s_, &StagingPipeline::has_free);
      c.buffer = free_.front();
      free_.pop_front();
      c.src = buffers_[static_cast<size_t>(c.buffer)];
      c.token = copier_.start(buffers_[static_cast<size_t>(c.buffer)], from, c.bytes);
      if (trace_) trace_->add(TraceEvent::StageCopy, static_cast<uint32_t>(c.buffer), c.seq, c.bytes);
    }
    chunks_.push_back(c);
    ++enqueued_;
    done += c.bytes;
  }
  progress();
}

bool StagingPipeline::progress() {
  // Post in order: the first unposted chunk goes once its copy is done, then the next; each
  // is marked on its own, so that its buffer comes back as soon as it has landed.
  for (size_t i = static_cast<size_t>(posted_ - released_); i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (c.buffer >= 0) {
      if (!copier_.done(c.token)) break;
      if (trace_) trace_->add(TraceEvent::StageCopied, static_cast<uint32_t>(c.buffer), c.seq);
    }
    inner_.put(c.dst, c.dst_offset, c.src, c.bytes);
    c.inner_ticket = inner_.mark(timeout_s_);
    if (trace_) trace_->add(TraceEvent::StagePut, static_cast<uint32_t>(std::max(c.buffer, 0)), c.seq, c.bytes);
    c.posted = true;
    ++posted_;
    if (i + 1 < chunks_.size() && chunks_[i + 1].buffer >= 0) ++overlapped_;  // the next one's copy runs
  }
  max_on_wire_ = std::max(max_on_wire_, posted_ - released_);
  // Release in order what has landed; a buffer comes back only then.
  while (!chunks_.empty() && chunks_.front().posted && inner_.landed(chunks_.front().inner_ticket)) {
    const Chunk& c = chunks_.front();
    if (c.buffer >= 0) {
      free_.push_back(c.buffer);
      if (trace_) trace_->add(TraceEvent::StageReleased, static_cast<uint32_t>(c.buffer), c.seq);
    }
    chunks_.pop_front();
    ++released_;
  }
  return !chunks_.empty();
}

bool StagingPipeline::landed(uint64_t ticket) {
  if (released_ >= ticket) return true;
  progress();
  return released_ >= ticket;
}

void StagingPipeline::post_all(double timeout_s) {
  if (!all_posted()) wait_until("the staged chunks were not all posted", timeout_s, &StagingPipeline::all_posted);
}

void StagingPipeline::drain(double timeout_s) {
  if (!none_left()) wait_until("the staged chunks did not all land", timeout_s, &StagingPipeline::none_left);
}

StagedEndpoint::StagedEndpoint(std::shared_ptr<Endpoint> inner, std::unique_ptr<Copier> copier,
                                   std::vector<char*> buffers, uint64_t chunk_bytes, double timeout_s,
                                   std::function<bool(const void*)> needs_staging)
    : inner_(std::move(inner)), copier_(std::move(copier)), timeout_s_(timeout_s), needs_staging_(std::move(needs_staging)) {
  if (!inner_ || !copier_ || !needs_staging_)
    fail(ErrorCode::InvalidArgument, "staged endpoint: needs an inner endpoint, a copier and a staging rule");
  pipeline_ = std::make_unique<StagingPipeline>(*inner_, *copier_, std::move(buffers), chunk_bytes, timeout_s_, inner_->peer());
}

void StagedEndpoint::flush(double timeout_s) {
  pipeline_->drain(timeout_s > 0 ? timeout_s : 1e9);
  inner_->flush(timeout_s);
}

}  // namespace weft::proxy
