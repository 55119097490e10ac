// Lanes of the UCX transport's active-message mode (WEFT_NET_LANES, net/ucx_transport.hpp):
// several UCX workers of the transport's context, each with an endpoint to the same lane of
// every peer (a TCP connection of its own over TCP) and a thread of its own. The proxy's
// thread only queues work on them; each lane's thread posts the sends queued on it and
// progresses its worker, so the messages arriving on that lane are copied into place there
// too (net/ucx_active.hpp): sending and receiving run on several threads at once.
//
// Which lanes carry what (`split`, with 2 lanes or more): data from a lower rank to a higher
// one goes on the even lanes, the other way on the odd ones, so on 2 ranks every lane's
// thread works one direction only (half the threads send, half receive). A put of at least
// 2 x stripe bytes is cut into pieces (4 KiB multiples) over the data lanes, round robin;
// signals go on a data lane too. Every data message and every signal carries a number
// (net/am_inbox.hpp): the receiver applies a signal only after all data sent before it and
// every earlier signal, whatever lane each came on.
//
// mark(peer) queues a flush of the peer's endpoint on every lane; landed() is true once all
// have completed. Failures: UCX's error callback of any lane's endpoint, or a failed
// request, is recorded per lane and peer; failed(peer) returns the first, and the transport
// turns it into Remote errors naming the peer. Nothing waits without a deadline.
// Internal to the network transport: needs UCX's headers.
#pragma once

#if WEFT_HAVE_UCX
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/ucx_active.hpp"
#include "net/ucx_api.hpp"

namespace weft::net {

struct LaneConfig {
  int lanes = 4;                  ///< 1 to kMaxLanes
  bool split = true;              ///< data of each direction on lanes of its own
  uint64_t stripe_bytes = 131072; ///< a put is cut into pieces of at least this many bytes
  uint64_t rndv_bytes = 4 << 20;  ///< pieces of at least this size go by rendezvous
  std::vector<bool> rndv_peers;   ///< index: rank; false: never by rendezvous to it (empty: to every rank)
  uint64_t spin_ns = 20'000'000;  ///< a lane polls this long after its last work, then sleeps
  double timeout_s = 30;          ///< teardown bound (at most 10 s)
};

class UcxLanes {
 public:
  static constexpr int kMaxLanes = 16;
  using AllGather = std::function<void(void* data, size_t bytes_per_rank)>;

  /// Creates the lanes' workers and installs `rx`'s handler on each (`rx` outlives this).
  UcxLanes(const UcxApi& api, ucp_context_h context, int rank, int nranks, AmReceiver& rx, LaneConfig config);
  ~UcxLanes();  ///< stops the threads, closes (gracefully) and destroys the workers
  UcxLanes(const UcxLanes&) = delete;
  UcxLanes& operator=(const UcxLanes&) = delete;

  /// Collective: exchanges the lanes' worker addresses through `allgather` (every rank must
  /// run as many lanes: the caller checked), connects lane i to lane i of every peer,
  /// starts the threads and finishes every connection's wire-up, bounded by `wait_s`.
  void connect(const AllGather& allgather, double wait_s);

  // The sending side: the proxy's thread only.
  /// Data for `address` on `peer` (inside memory it registered), from `src` (valid until
  /// the receiver consumed it, or until a mark after it landed).
  void put(int peer, uint64_t address, const void* src, uint64_t bytes);
  /// `n` words for `address` on `peer`, applied after every data message sent before them.
  void words(int peer, uint64_t address, const uint64_t* values, uint64_t n);
  /// A ticket for everything queued to `peer` so far.
  uint64_t mark(int peer);
  /// Whether everything up to `ticket` has been handed to the transport and flushed.
  bool landed(int peer, uint64_t ticket) const;
  /// True while no lane has work queued or in flight (the proxy backs off then).
  bool idle() const;

  /// UCS_OK, or the first failure of `peer`'s endpoints on any lane.
  ucs_status_t failed(int peer) const;
  /// Stops the threads and closes every endpoint (`force`: at once, without flushing).
  void close(bool force);
  /// "4 lanes, each a UCX worker and a thread (data to higher ranks on lanes 0, 2, ...)".
  std::string describe() const;
  int count() const { return static_cast<int>(lanes_.size()); }
  /// Every lane's thread moves onto `cpus` (none: stays where it is) at its next pass.
  void place(const std::vector<int>& cpus);

 private:
  struct Lane;
  struct Link;
  struct Op;
  struct Sender {
    AmNumbering numbering;
    uint64_t marked = 0;
    size_t cursor = 0;
    std::vector<int> data_lanes;  ///< lanes carrying this rank's data to the peer
  };
  void enqueue(int lane, Op op);
  void run(Lane& lane);
  void execute(Lane& lane, Op& op);
  bool reap(Lane& lane);  ///< true while anything is in flight
  void stop_threads();

  const UcxApi& api_;
  ucp_context_h context_;
  int rank_, nranks_;
  AmReceiver& rx_;
  LaneConfig config_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Sender> senders_;  // index: rank
  std::mutex place_mu_;
  std::vector<int> cpus_;
  std::atomic<uint64_t> placement_{0};  // bumped by place()
  bool closed_ = false;
};

}  // namespace weft::net
#endif
