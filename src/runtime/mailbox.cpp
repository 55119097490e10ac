// Communicator's mailboxes and revoke (runtime/communicator.hpp): what ncclCommShrink needs
// of a parent communicator whose excluded ranks take no part (and may be gone).
//
// A slot is 256 bytes of the receiver's arena, one per sender: the message's sequence number
// in its first 8 bytes, then the payload. The sender copies the payload, then (a second
// copy, after the first completed) the sequence number; the receiver polls the sequence
// number alone and reads the payload only once it matches, so it never sees a half-written
// one.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

constexpr uint64_t kPayloadOffset = 64;  // the sequence number on its own line
static_assert(kPayloadOffset + Communicator::kMailboxPayload <= ArenaLayout::kMailboxSlot);

/// Host <-> device copies on a private stream: never behind a kernel of the communicator
/// that spins (ranks of this process may share the GPU).
void copy_now(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  cudaStream_t s = nullptr;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  WEFT_CUDA_CHECK(e);
}

}  // namespace

bool Communicator::reaches(int peer) const {
  return peer >= 0 && peer < nranks_ && peer_arena_.size() == static_cast<size_t>(nranks_) &&
         peer_arena_[static_cast<size_t>(peer)] != nullptr;
}

void Communicator::mailbox_post(int peer, uint64_t seq, const void* data, size_t bytes) {
  if (bytes > kMailboxPayload || seq == 0) fail(ErrorCode::Internal, "mailbox message too long or numbered 0");
  if (!reaches(peer))
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                                      " runs on another host: its memory is not mapped here");
  RelaxedCapture relaxed;
  DeviceGuard guard(device_);
  char* slot = peer_arena_[static_cast<size_t>(peer)] + layout_.mailbox() +
               static_cast<uint64_t>(rank_) * ArenaLayout::kMailboxSlot;
  copy_now(slot + kPayloadOffset, data, bytes, cudaMemcpyHostToDevice);
  copy_now(slot, &seq, sizeof(seq), cudaMemcpyHostToDevice);
}

void Communicator::mailbox_wait(int from, uint64_t seq, void* data, size_t bytes) {
  if (bytes > kMailboxPayload || from < 0 || from >= nranks_) fail(ErrorCode::Internal, "bad mailbox read");
  RelaxedCapture relaxed;
  DeviceGuard guard(device_);
  const char* slot = arena_ + layout_.mailbox() + static_cast<uint64_t>(from) * ArenaLayout::kMailboxSlot;
  const double limit = timeout_s_ > 0 ? timeout_s_ : config::get_seconds("WEFT_BOOTSTRAP_TIMEOUT");
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  for (;;) {
    uint64_t seen = 0;
    copy_now(&seen, slot, sizeof(seen), cudaMemcpyDeviceToHost);
    if (seen == seq) break;
    if (std::chrono::steady_clock::now() > end)
      fail(ErrorCode::Timeout, "rank " + std::to_string(rank_) + ": rank " + std::to_string(from) +
                                   " did not send message " + std::to_string(seq) + " within " +
                                   std::to_string(static_cast<int>(limit)) + " s (last seen: " + std::to_string(seen) +
                                   "); did it make the same call?");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  copy_now(data, slot + kPayloadOffset, bytes, cudaMemcpyDeviceToHost);
}

void Communicator::revoke(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (broken_ == ErrorCode::Success) {
      broken_ = ErrorCode::InvalidUsage;
      broken_message_ = "rank " + std::to_string(rank_) + ": " + why + "; destroy or abort this communicator";
    }
  }
  WEFT_LOG(Info, "INIT", "rank " << rank_ << ": " << why << "; its kernels stop at their next wait");
  if (abort_host_ != nullptr) *reinterpret_cast<volatile uint32_t*>(abort_host_) = 1;
}

}  // namespace weft
