// The receiving side of weft's UCX transport in active-message mode (WEFT_NET_PROTO=am,
// net/ucx_transport.hpp): where each peer's messages land and in what order its signals
// take effect. Host-only and free of UCX, so that its ordering is tested without a network.
//
// A peer's data arrives either at once (eager: the caller copies it in the handler, then
// calls landed()) or by rendezvous (the transfer runs on after the handler returns; landed()
// once it completes; completions may come in any order). Each signal (one or more 8-byte
// words) carries how many data messages its sender had sent to this rank before it: it
// takes effect once that many of the peer's messages have landed, at once when they have,
// else it waits and the landed() that completes the count writes it (release stores). Ready
// signals of a peer are written in the order they arrived.
//
// Every address comes from the network: locate() accepts only ranges inside memory this
// rank registered (add_memory), and alignment for signals; the caller refuses the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace weft::net {

class AmInbox {
 public:
  explicit AmInbox(int nranks) : peers_(static_cast<size_t>(nranks > 0 ? nranks : 0)) {}

  /// Memory of this rank that peers may write: [base, base + bytes). May run while another
  /// thread receives (locate takes the same lock); everything else is that thread's.
  void add_memory(uint64_t base, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(memories_mu_);
    memories_.push_back({base, bytes});
  }
  /// The local address of [address, address + bytes) when it lies inside one registered
  /// memory (and `align` divides address); else null. bytes may be 0 (then inside or at the end).
  char* locate(uint64_t address, uint64_t bytes, uint64_t align = 1) const;

  /// One more data message of `peer` has landed; writes the signals that were waiting for it.
  void landed(int peer);
  /// Writes `n` words to `where` (release stores, in order) once `after` data messages of
  /// `peer` have landed; copies `values`. False (nothing kept) when `peer` already has
  /// kMaxWaiting signals waiting: a peer that announces data it never sends.
  bool signal(int peer, uint64_t after, uint64_t* where, const uint64_t* values, uint64_t n);
  static constexpr size_t kMaxWaiting = 1 << 16;

  /// Signals of `peer` not yet written; data messages of `peer` landed so far.
  size_t waiting(int peer) const { return peers_.at(static_cast<size_t>(peer)).signals.size(); }
  uint64_t landed_count(int peer) const { return peers_.at(static_cast<size_t>(peer)).landed; }

 private:
  struct Signal {
    uint64_t after = 0;
    uint64_t* where = nullptr;
    std::vector<uint64_t> values;
  };
  struct Peer {
    uint64_t landed = 0;
    std::deque<Signal> signals;  ///< waiting, in arrival order
  };
  static void write(uint64_t* where, const uint64_t* values, uint64_t n);
  void drain(Peer& p);

  struct Range {
    uint64_t base, bytes;
  };
  mutable std::mutex memories_mu_;
  std::vector<Range> memories_;
  std::vector<Peer> peers_;
};

}  // namespace weft::net
