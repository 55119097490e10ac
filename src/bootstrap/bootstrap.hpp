// Bootstrap: how the ranks of a communicator find each other, over TCP as NCCL does.
//
// weftGetUniqueId creates a UniqueId (the root's address, a public magic naming the
// communicator and a 256-bit secret drawn from getrandom) and starts a root thread in the
// calling process. Every rank connects to the root and proves that it holds the secret
// (bootstrap_wire.hpp: an HMAC challenge/response both ways; the secret never travels),
// then claims its rank and gives the address of its own listening socket. Once all ranks
// have arrived the root sends each the address table (with a proof) and exits; the ranks
// then connect in a ring (rank r to r+1), again proving the secret both ways, and run
// all-gathers and barriers over it.
//
// A connection that cannot prove the secret is refused, logged and never sees data.
// Every field a peer sends is checked before use. Every wait is bounded: a rank that never
// arrives, a peer that dies or closes its socket, a rank of another weft version, two
// processes claiming one rank, each ends in a weft::Error that names the rank (or address)
// at fault, never a hang.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"

namespace weft {

/// The content of a weftUniqueId (128 bytes once serialized: magic at 0, version at 8,
/// root address at 16, secret at 48; the rest zero).
struct UniqueId {
  uint64_t magic = 0;       ///< random, public: names the communicator in errors
  uint32_t version = 0;     ///< weft version code of the process that created it
  net::Address root;        ///< where the root listens
  auth::Secret secret{};    ///< what every rank proves it holds; all zero: none (refused)
  /// Not serialized. Set where the id comes from a file that may be left over from an
  /// earlier run (weftCommInitFromEnv): a rank whose root does not answer to this id
  /// calls it to re-read the id (true: `id` changed) and tries again until its deadline.
  /// It sets magic, version, root and secret only (never `refresh` itself).
  std::function<bool(UniqueId& id)> refresh;

  static constexpr size_t kBytes = 128;
  void serialize(char out[kBytes]) const;
  static UniqueId deserialize(const char in[kBytes]);
};

/// The weft version code (WEFT_VERSION_CODE) this library speaks in its hellos.
uint32_t bootstrap_version();

/// How to start a bootstrap root.
struct RootOptions {
  net::Address address;                 ///< unset: the default interface (net::default_interface_address)
  uint64_t magic = 0;                   ///< 0: random
  std::optional<auth::Secret> secret;   ///< unset: drawn from getrandom
  double timeout_s = -1;                ///< negative: WEFT_BOOTSTRAP_TIMEOUT
  /// Called on the root thread once every rank has joined, or the root gave up (the file
  /// rendezvous removes its file here).
  std::function<void()> on_finish;
};

/// Creates a unique id whose root listens on `o.address` (port 0: a free one) and starts
/// the root thread, which serves one communicator and exits (after the timeout at the latest).
UniqueId start_bootstrap_root(RootOptions o);
/// The same with a random secret; `magic` 0 draws a random one.
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
  /// a liveness watch (bootstrap/peer_watchdog.hpp): one of them closing means that neighbour
  /// is gone (POLLRDHUP / POLLHUP). Never read or write them; stop watching before close().
  int next_fd() const { return next_.fd(); }
  int prev_fd() const { return prev_.fd(); }

  /// Liveness hook: the ring neighbours (rank - 1 and rank + 1, the only ranks this rank
  /// stays connected to after init) whose connection has closed or broken, e.g. because
  /// their process died. Polls without waiting or consuming data, so another thread may
  /// call it while an all-gather runs (not while close() runs). After close(), both
  /// neighbours are reported.
  std::vector<int> closed_neighbours() const;

 private:
  Bootstrap() = default;
  int rank_ = 0;
  int nranks_ = 0;
  net::Socket next_;  ///< to rank + 1
  net::Socket prev_;  ///< from rank - 1
};

}  // namespace weft
