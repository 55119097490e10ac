// Where a rank's connection FIFOs that cross the network (ranks on different nodes,
// emulated or not: net/node_layout.hpp) keep their memory: one region per rank, registered
// with the network transport, laid out so that every rank can compute every other rank's
// offsets from the node layout alone.
//
// Region of rank r, with C(r) its peers on other nodes in rank order (i = index in C(r)),
// K connections per pair, FIFO depth D, Simple slots of S bytes:
//   counters   at (i*K + k) * 128: posted (written by peer C[i]'s proxy: messages it has
//              sent r on connection k), then at + 64 acked (written by its proxy: messages
//              of r's it has consumed); rounded up to 4 KiB;
//   out[i][k]  D slots of S bytes: r's staging for messages to C[i] (the proxy puts from here);
//   in[i][k]   D slots of S bytes: messages from C[i] land here.
// Only Simple slots: LL is not carried across the network (the communicator forces Simple
// where any link crosses it).
//
// Host-only, so that the layout is checked by CPU tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

struct NetLayout {
  int32_t connections = 0;
  uint32_t depth = 0;
  uint32_t slot_bytes = 0;
  std::vector<int> node_of_rank;

  /// Peers of `rank` on other nodes, in rank order.
  std::vector<int> cross_peers(int rank) const;
  /// Index of `peer` in cross_peers(rank); -1 when on the same node (or itself).
  int cross_index(int rank, int peer) const;
  bool crosses(int a, int b) const;

  uint64_t counter_bytes(int rank) const;
  /// Offsets in `rank`'s region of its counters for peer `peer` (another node), connection k.
  uint64_t posted(int rank, int peer, int k) const;
  uint64_t acked(int rank, int peer, int k) const { return posted(rank, peer, k) + 64; }
  /// Offset in `rank`'s region of its staging slots for messages to `peer` on connection k.
  uint64_t out(int rank, int peer, int k) const;
  /// Offset in `rank`'s region of the slots messages from `peer` on connection k land in.
  uint64_t in(int rank, int peer, int k) const;
  uint64_t total(int rank) const;
  /// Port channels `rank`'s proxy needs: one per connection and direction per cross peer.
  int channels(int rank) const;

  /// Throws InvalidUsage (naming the rank and the knobs to lower) when `rank`'s region or
  /// channel count exceeds what a proxy holds (4 GiB - 1 per memory, `max_channels`).
  void check(int rank, int max_channels) const;
};

}  // namespace weft
