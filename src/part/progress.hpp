// The progression-engine path's host logic, apart from CUDA so that it is unit tested
// (tests/unit/part/test_part_progress.cpp): which transfer path a context uses, and what
// the engine puts for a transport partition the device marked ready.
//
// The device marks transport partition t ready by storing the epoch into flag t of a
// host-mapped array (weft/part/device.hpp); the engine (part/engine.hpp) polls the array
// and, for a flag that holds the request's current epoch, puts the transport partition's
// bytes into the receiver's buffer and then writes the epoch into the receiver's flag of t,
// ordered after the data. plan_transport_put maps (t, value) to that put and checks every
// number before anything moves: the transport partition index, the flag's value against the
// epoch, the range against the receiver's buffer and flag block (as its reply described
// them). A check that fails is an error naming the request and the peer, never a transfer.
#pragma once

#include <cstdint>
#include <string>

namespace weft::part {

/// How a send request's partitions reach the receiver.
enum class TransferPath : int { Default = 0, Kernel = 1, Proxy = 2 };

/// WEFT_PART_PATH's value parsed: "kernel" or "proxy" (empty: kernel). Anything else is an
/// InvalidArgument error naming the variable and the value.
TransferPath parse_transfer_path(const std::string& text);
/// `requested`, or WEFT_PART_PATH's value for Default. An out-of-range value is InvalidArgument.
TransferPath resolve_transfer_path(int requested);
const char* transfer_path_name(TransferPath p);

/// What the engine knows of one send request.
struct ProgressJobDesc {
  std::string who;              ///< "rank 0: psend to rank 1 (tag 7)"
  uint32_t partitions = 0;      ///< user partitions
  uint32_t threshold = 1;       ///< user partitions per transport partition
  uint64_t partition_bytes = 0;
  uint64_t send_bytes = 0;      ///< the local buffer
  uint64_t remote_bytes = 0;    ///< the receiver's buffer
  uint64_t remote_flag_words = 0;  ///< the receiver's flag block (kFlagFirst + its partitions); staged: its signal ring
  /// Staged (across emulated nodes where UCX cannot read GPU memory, or WEFT_PART_STAGE=1): the
  /// data goes through page-locked mirrors, and a run's signal is one record in the receiver's
  /// ring (kRecordWords words per slot, `partitions` slots) instead of its flag words.
  bool staged = false;
  /// The rank at the other end (-1: none named). The engine checks that rank's network
  /// endpoint only while this job has work (an epoch or transfers in flight), so a peer that
  /// leaves once its requests are done is not an error for the requests of other peers.
  int peer = -1;
};

/// The engine's transfers: a run of ready transport partitions is cut, at transport-partition
/// boundaries, into transfers of at most kEngineChunkBytes (one transport partition may be
/// larger), so that staging copies, network puts and the receiver's copies overlap; each
/// request has at most kEngineInflight transfers in flight.
constexpr uint64_t kEngineChunkBytes = 4ull << 20;
constexpr uint32_t kEngineInflight = 32;
/// Coalescing (issue 28: on two H200s each transfer costs the engine a few host API calls,
/// and blocks that end in any order left the ready set in many short runs, one transfer
/// each). A run of at least kEngineEagerBytes is posted in the pass that finds it; shorter
/// ones wait while more of the epoch keeps becoming ready: they are posted once every
/// transport partition from the cursor on is ready, once the job has no room for more
/// transfers, or once the count of ready ones has not grown for kEngineHoldNs (RunHold).
constexpr uint64_t kEngineEagerBytes = 512ull << 10;
constexpr int64_t kEngineHoldNs = 4000;
/// The hold of one job's short runs: `post(ready, now_ns)` with the count of transport
/// partitions ready or taken in the epoch is true once that count has stayed the same for
/// kEngineHoldNs (so a run never waits more than that after the last partition it could
/// join); `reset` at each epoch.
struct RunHold {
  uint64_t seen = ~uint64_t{0};
  int64_t since_ns = 0;
  void reset() { seen = ~uint64_t{0}; }
  bool post(uint64_t ready, int64_t now_ns) {
    if (ready != seen) {
      seen = ready;
      since_ns = now_ns;
      return false;
    }
    return now_ns - since_ns >= kEngineHoldNs;
  }
};
/// Staged transfers are cut smaller, so that the copy into the page-locked mirror, the network
/// put and the receiver's copy of consecutive pieces overlap even for a message of a few MiB
/// (with 4 MiB pieces a 2 MiB message went through the three steps one after another).
constexpr uint64_t kEngineStagedChunkBytes = 256ull << 10;
constexpr uint64_t engine_chunk_bytes(bool staged) { return staged ? kEngineStagedChunkBytes : kEngineChunkBytes; }
/// A run this long is posted at once: kEngineEagerBytes, staged no more than one piece.
constexpr uint64_t engine_eager_bytes(bool staged) {
  return staged && kEngineStagedChunkBytes < kEngineEagerBytes ? kEngineStagedChunkBytes : kEngineEagerBytes;
}
/// Words of one signal record in a staged receiver's ring: (first << 32 | count), threshold.
constexpr uint32_t kRecordWords = 2;

/// Transport partitions [first, first + count) of one request: `bytes` at `offset`.
struct TransportRun {
  uint32_t first = 0, count = 0;
  uint64_t offset = 0, bytes = 0;
};

/// The signal record of `run` sent with threshold `threshold`.
void encode_arrival(const TransportRun& run, uint32_t threshold, uint64_t record[kRecordWords]);
/// The receiver's reading of a signal record (d: its own request; d.threshold is ignored).
/// `complete` is false while either word is still 0 (not yet landed). Checked: the threshold
/// (1..partitions), the run inside the transport partitions, and `arrived` (transport partitions
/// already arrived this epoch) plus the run at most all of them; else Remote naming d.who.
TransportRun decode_arrival(const ProgressJobDesc& d, const uint64_t record[kRecordWords], uint64_t arrived,
                            bool* complete, uint32_t* threshold);

/// One transfer of the engine: `bytes` from the send buffer at `offset` to the receive
/// buffer at `offset`, then the receiver's flag word `flag_word` set to `epoch`.
struct TransportPut {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t flag_word = 0;
  uint64_t epoch = 0;
};

/// Checks a job's description once (at setup): the threshold, the buffers hold every
/// partition, the flag block holds every transport partition. Error: InvalidUsage / Remote.
void check_progress_job(const ProgressJobDesc& d);
/// The put for transport partition `t` whose ready flag holds `value` while the request is
/// in epoch `epoch`; `pending` is false when the flag holds an older epoch (nothing to do).
/// A value above the epoch, or t out of range, is an error (Internal: the device wrote it).
/// The put must fit both buffers and, not staged, flag_word the receiver's flag block (staged,
/// the signal goes to a ring slot instead, which the engine bounds).
TransportPut plan_transport_put(const ProgressJobDesc& d, uint32_t t, uint64_t value, uint64_t epoch, bool* pending);

}  // namespace weft::part
