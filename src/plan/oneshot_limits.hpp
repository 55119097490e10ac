// The one-shot kernel's limits, as numbers: how many thread blocks, threads and words it
// has, so how many bytes per rank and peer and how many ranks it carries. The kernel's
// regions are laid out from them (exec/oneshot.hpp), and the algorithm registry
// (plan/algorithms.hpp) answers from them whether the kernel can carry a call; the
// simulator asks the registry (sim/call_model.hpp). Host and device; no includes but
// <cstdint>.
#pragma once

#include <cstdint>

namespace weft::oneshot {

/// Thread blocks of one call, at most.
inline constexpr int kBlocks = 32;
/// Threads per thread block, at most; each thread moves up to kWordsPerThread 8-byte words
/// per peer.
inline constexpr int kThreads = 512;
inline constexpr int kWordsPerThread = 4;
/// Largest payload (bytes per rank and peer) the kernel carries: 512 KiB.
inline constexpr uint64_t kMaxPeerBytes = 8ull * kThreads * kWordsPerThread * kBlocks;
/// Largest rank count (the kernel's parameters hold every peer's address).
inline constexpr int kMaxRanks = 8;

}  // namespace weft::oneshot
