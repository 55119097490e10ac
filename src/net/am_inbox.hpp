// The receiving side of weft's UCX transport in active-message mode (WEFT_NET_PROTO=am,
// net/ucx_transport.hpp): where each peer's messages land and in what order its signals
// take effect. Host-only and free of UCX, so that its ordering is tested without a network.
//
// A peer numbers its data messages to this rank 0, 1, 2, ... and, separately, its signals
// 0, 1, 2, ... . Data arrives in any order: on several lanes (UCX workers, each with its
// own thread and connection), eagerly (copied in the handler) or by rendezvous (landing
// later, completions in any order); landed(peer, seq) records one. Each signal (one or more
// 8-byte words) carries its own number and how many data messages its sender had sent this
// rank before it: it takes effect once data 0 .. after - 1 have ALL landed (the prefix, not
// a count, so data sent after the signal and landing early never releases it) and every
// earlier signal of that peer has taken effect, so a counter written by successive signals
// never goes back whatever lane each came on. The call that completes the condition writes
// it (release stores).
//
// Everything comes from the network and is bounded: a data number already landed or more
// than kWindow ahead of the prefix, a signal number already seen or more than kMaxWaiting
// ahead, and more than kMaxWaiting signals or early data messages waiting are refused
// (false), so that the caller drops the message and stops trusting the peer. Addresses:
// locate() accepts only ranges inside memory this rank registered (add_memory), and
// alignment for signals. Every member is safe to call from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace weft::net {

class AmInbox {
 public:
  explicit AmInbox(int nranks) : peers_(static_cast<size_t>(nranks > 0 ? nranks : 0)) {}

  /// Memory of this rank that peers may write: [base, base + bytes).
  void add_memory(uint64_t base, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(memories_mu_);
    memories_.push_back({base, bytes});
  }
  /// The local address of [address, address + bytes) when it lies inside one registered
  /// memory (and `align` divides address); else null. bytes may be 0 (then inside or at the end).
  char* locate(uint64_t address, uint64_t bytes, uint64_t align = 1) const;

  /// Whether data message `seq` of `peer` may land (not landed yet, within the window):
  /// checked before its bytes are written, so that a replayed number writes nothing.
  bool admissible(int peer, uint64_t seq) const;
  /// Data message `seq` of `peer` has landed; writes the signals that were waiting for it.
  /// False (nothing recorded) for a number landed before, beyond the window, or one early
  /// message too many.
  bool landed(int peer, uint64_t seq);
  /// Signal `seq` of `peer`: writes `n` words to `where` (release stores, in order) once
  /// data 0 .. after - 1 of `peer` have landed and signals 0 .. seq - 1 were written;
  /// copies `values`. False (nothing kept) for a number seen before or too far ahead, or
  /// when kMaxWaiting signals of `peer` already wait.
  bool signal(int peer, uint64_t seq, uint64_t after, uint64_t* where, const uint64_t* values, uint64_t n);

  static constexpr size_t kMaxWaiting = 1 << 16;
  static constexpr uint64_t kWindow = 1 << 20;

  /// Signals of `peer` not yet written; data messages landed in order so far (the prefix);
  /// data landed beyond a gap.
  size_t waiting(int peer) const;
  uint64_t prefix(int peer) const;
  size_t early(int peer) const;

 private:
  struct Signal {
    uint64_t after = 0;
    uint64_t* where = nullptr;
    std::vector<uint64_t> values;
  };
  struct Peer {
    uint64_t prefix = 0;          ///< data 0 .. prefix - 1 have landed
    std::set<uint64_t> early;     ///< landed beyond a gap
    uint64_t next_signal = 0;     ///< the next signal number to write
    std::map<uint64_t, Signal> signals;  ///< waiting, by number
  };
  static void write(uint64_t* where, const uint64_t* values, uint64_t n);
  static void drain(Peer& p);
  const Peer* peer_of(int peer) const;

  struct Range {
    uint64_t base, bytes;
  };
  mutable std::mutex memories_mu_;
  std::vector<Range> memories_;
  mutable std::mutex mu_;  // the peers' state
  std::vector<Peer> peers_;
};

}  // namespace weft::net
