// What the one-shot small-message kernel (exec/oneshot.hpp) can carry: its thread blocks,
// threads and largest payload and rank count. Here, below the simulator and the choice of
// algorithm, because both need them through the algorithm registry (plan/algorithms.hpp);
// the kernel and the arena layout take them from here too. Host and device code.
#pragma once

#include <cstdint>

namespace weft::exec {

/// Thread blocks of one call, at most.
constexpr int kOneShotBlocks = 64;
/// Threads per thread block, at most; each thread moves up to kOneShotWordsPerThread
/// 8-byte words per peer.
constexpr int kOneShotThreads = 512;
constexpr int kOneShotWordsPerThread = 4;
/// Packet bytes of one thread block's region (per source rank and parity).
constexpr uint64_t kOneShotBlockBytes = 16ull * kOneShotThreads * kOneShotWordsPerThread;
/// Largest payload (bytes per rank and peer) the path carries: 1 MiB (the tables choose it up
/// to 512 KiB; WEFT_ALGO=oneshot forces it up to here).
constexpr uint64_t kOneShotMaxBytes = 8ull * kOneShotThreads * kOneShotWordsPerThread * kOneShotBlocks;
/// Most thread blocks of a call launched as a programmatic dependent (WEFT_ONESHOT_PDL): such a
/// call's blocks may be placed while the previous kernel still runs, and wait there; a few
/// blocks take a few SMs, while a large call's would take SMs that another communicator's
/// kernel on the same GPU may need to make progress. Calls of more blocks launch plainly.
constexpr int kOneShotPdlMaxBlocks = 8;
/// Largest rank count (the kernel's parameters hold every peer's address).
constexpr int kOneShotMaxRanks = 8;

}  // namespace weft::exec
