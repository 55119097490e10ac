// Bootstrap: how the ranks of a communicator find each other, over TCP as NCCL does.
//
// weftGetUniqueId creates a UniqueId (the root's address and a random magic) and starts a
// root thread in the calling process. Every rank connects to the root and says hello
// (magic, weft version, rank, rank count, the address of its own listening socket). Once
// all ranks have arrived the root sends each the table of addresses and exits; the ranks
// then connect in a ring (rank r to r+1) over which all-gathers and barriers run.
//
// Every wait is bounded: a rank that never arrives, a peer that dies or closes its socket,
// a rank of another weft version, a stray connection with the wrong magic, each ends in a
// weft::Error that names the rank (or address) at fault, never a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/socket.hpp"

namespace weft {

/// The content of a weftUniqueId (128 bytes once serialized).
struct UniqueId {
  uint64_t magic = 0;       ///< random; every hello must carry it
  uint32_t version = 0;     ///< weft version code of the process that created it
  net::Address root;        ///< where the root listens

  static constexpr size_t kBytes = 128;
  void serialize(char out[kBytes]) const;
  static UniqueId deserialize(const char in[kBytes]);
};

/// The weft version code (WEFT_VERSION_CODE) this library speaks in its hellos.
uint32_t bootstrap_version();

/// Creates a unique id whose root listens on `address` (port 0: a free port on the
/// default interface, see net::default_interface_address) and starts the root thread,
/// which serves one communicator and exits (after `timeout_s` at the latest).
/// `magic` 0 draws a random one.
UniqueId start_bootstrap_root(net::Address address = {}, uint64_t magic = 0, double timeout_s = -1);

/// One rank's end of the bootstrap: ring connections to its neighbours.
class Bootstrap {
 public:
  /// Joins the communicator described by `id` as `rank` of `nranks`. Waits at most
  /// `timeout_s` (negative: WEFT_BOOTSTRAP_TIMEOUT) for every rank to arrive.
  /// `version` overrides the version sent in the hello (tests use it to fake a mismatch).
  static std::unique_ptr<Bootstrap> join(const UniqueId& id, int rank, int nranks, double timeout_s = -1,
                                         uint32_t version = 0);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  /// All-gather over the ring: `data` holds nranks blocks of `bytes` each; this rank's
  /// block (at rank * bytes) is sent, every other block is filled in. Bounded by
  /// `timeout_s` (negative: WEFT_TIMEOUT).
  void allgather(void* data, size_t bytes, double timeout_s = -1);
  /// Returns when every rank has entered the barrier (bounded like allgather).
  void barrier(double timeout_s = -1);
  /// Closes the sockets: peers blocked on this rank get an error at once.
  void close();
  /// The ring sockets to rank + 1 and from rank - 1 (-1 when closed or with one rank), for
  /// a liveness watch (runtime/peer_watchdog.hpp): one of them closing means that neighbour
  /// is gone. The caller must stop watching before close().
  int next_fd() const { return next_.fd(); }
  int prev_fd() const { return prev_.fd(); }

 private:
  Bootstrap() = default;
  int rank_ = 0;
  int nranks_ = 0;
  uint64_t magic_ = 0;
  net::Socket next_;  ///< to rank + 1
  net::Socket prev_;  ///< from rank - 1
};

}  // namespace weft
