// MemoryChannelDeviceHandle: one-sided communication with one peer through memory mapped
// from it (CUDA IPC / peer access), after MSCCL++'s memory channel. Its host half is a
// weft::MemoryChannel (weft/channel.hpp for users' channels; weft's own connection FIFOs
// are made by the communicator, src/exec/channel_end.hpp).
//
//   put / get     copy between this rank's registered buffer and the peer's, spread over a
//                 thread group with 16-byte accesses (no synchronization inside);
//   signal        one thread, after the group's puts and a __syncthreads: the peer may read;
//   wait          one thread: waits (bounded) for the peer's next signal;
//   flush         makes this thread's earlier puts visible system-wide (a memory channel's
//                 puts are plain stores, so flush is a fence; signal already implies it);
//   put_packets / get_packets   LL packets into the peer's packet buffer and out of ours:
//                 no signal needed, the data carries its flag.
//
// A FIFO (depth > 0) is how weft's own kernels use a channel: one direction of a
// connection, `depth` slots of `slot_bytes` (Simple) and of `packet_slot_bytes` (LL) in the
// receiver's memory. Message q uses slot q % depth. The send end writes into the peer's
// slots (remote, packets_out); its semaphore's inbound counter is the receiver's ack count
// and its outbound the receiver's posted count. The receive end reads its own slots
// (local, packets_in); inbound is the posted count, outbound the sender's ack count. Each
// end keeps its message count in its semaphore (send: signalled, receive: waited), in its
// own memory, so counts persist across launches and graph replays. One thread per end:
//
//   send:    pos = send_position(); wait_credit(pos) (acked + depth > pos; wait_credit_cached
//            skips the load while a count seen earlier already allows pos);
//            the block writes send_slot(pos) / send_packets(pos); __syncthreads;
//            post(pos) (Simple: release store) or post_packets(pos) (LL: plain store).
//   receive: pos = recv_position(); wait_posted(pos) (Simple only: LL polls the packets);
//            the block reads recv_slot(pos) / recv_packets(pos); __syncthreads;
//            ack(pos) (Simple) or ack_packets(pos) (LL).
//
// Across the network (a FIFO between ranks on different nodes, or emulated nodes:
// WEFT_EMULATE_NODES), `net` points at a NetFifoDeviceHandle and the same calls run over a
// port channel: the send end's slots (`remote`) are a local staging area registered with
// the network transport, post(pos, bytes, d) asks the proxy to put the slot into the
// peer's slot pos % depth and then to write the posted count there (ordered after the
// data), and ack(pos, d) asks it to write the acked count into the sender's memory. The
// waits are unchanged (the counters are in this rank's memory either way). Only Simple
// messages cross the network: LL is refused there (the communicator forces Simple).
//
// Trivially copyable, passed to kernels by value. It stays valid while the host object it
// came from lives (see docs/device-api.md).
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/copy.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/port_channel.hpp"
#include "weft/device/semaphore.hpp"
#include "weft/device/thread_group.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

/// A FIFO end across the network: the port channel that carries its messages (send end)
/// or its acks (receive end), and where the slots live in the registered memories.
struct NetFifoDeviceHandle {
  PortChannelDeviceHandle port;
  uint64_t src_base = 0;  ///< send end: offset of this end's staging slots in its registered memory
  uint64_t dst_base = 0;  ///< send end: offset of the peer's slots in the peer's registered memory
};
static_assert(std::is_trivially_copyable_v<NetFifoDeviceHandle>);

struct MemoryChannelDeviceHandle {
  char* local = nullptr;            ///< this rank's registered buffer (FIFO receive end: its Simple slots)
  char* remote = nullptr;           ///< the peer's registered buffer, mapped here (FIFO send end: the peer's slots)
  LLPacket* packets_in = nullptr;   ///< local packet buffer the peer writes into (receive end: LL slots)
  LLPacket* packets_out = nullptr;  ///< the peer's packet buffer for us, mapped here (send end: LL slots)
  PeerSemaphoreDeviceHandle semaphore;
  uint32_t depth = 0;               ///< FIFO slots; 0: not a FIFO
  uint32_t slot_bytes = 0;          ///< bytes of one Simple slot
  uint32_t packet_slot_bytes = 0;   ///< bytes of one LL slot (16-byte packets, 8 data bytes each)
  int32_t peer = -1;                ///< the peer's rank in the communicator
  const NetFifoDeviceHandle* net = nullptr;  ///< device memory; non-null: the FIFO crosses the network

#if WEFT_DEVICE_CODE
  /// Copies `bytes` from local + src_offset to remote + dst_offset.
  WEFT_DEVICE_INLINE void put(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, ThreadGroup g) {
    copy_bytes(remote + dst_offset, local + src_offset, bytes, g);
  }
  /// Copies `bytes` from remote + src_offset to local + dst_offset.
  WEFT_DEVICE_INLINE void get(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, ThreadGroup g) {
    copy_bytes(local + dst_offset, remote + src_offset, bytes, g);
  }
  WEFT_DEVICE_INLINE void signal() { semaphore.signal(); }
  WEFT_DEVICE_INLINE WaitResult wait(const Deadline& d) { return semaphore.wait(d); }
  WEFT_DEVICE_INLINE void flush() { __threadfence_system(); }
  /// Writes `bytes` of local + src_offset as packets at packet index dst_offset / 8 of the
  /// peer's packet buffer (dst_offset a multiple of 8).
  WEFT_DEVICE_INLINE void put_packets(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, uint32_t flag,
                                      ThreadGroup g) {
    ll_put(packets_out + dst_offset / 8, local + src_offset, bytes, flag, g);
  }
  /// Waits for `bytes` of packets at packet index src_offset / 8 of the local packet buffer
  /// and writes their data to local + dst_offset.
  WEFT_DEVICE_INLINE WaitResult get_packets(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, uint32_t flag,
                                            ThreadGroup g, const Deadline& d) {
    return ll_get(local + dst_offset, packets_in + src_offset / 8, bytes, flag, g, d);
  }

  // ---- FIFO, send end (one thread unless said otherwise) ----
  /// Messages this end has posted so far.
  WEFT_DEVICE_INLINE uint64_t send_position() const { return *semaphore.signalled; }
  /// Waits until message `pos` has a free slot: the receiver has acked message pos - depth.
  WEFT_DEVICE_INLINE WaitResult wait_credit(uint64_t pos, const Deadline& d) const {
    const uint64_t* acked = semaphore.inbound;
    const uint64_t n = depth;
    return spin_until([&] { return ld_acquire_sys(acked) + n >= pos + 1; }, d);
  }
  /// As wait_credit, with `acked` the last ack count this end saw (the caller keeps it across
  /// calls: the interpreter in shared memory for the launch). No load while it already frees
  /// message `pos`'s slot; otherwise it is reloaded until it does (or the wait fails), and
  /// `acked` holds the last value read. Counts only grow, so an old value only costs a reload.
  WEFT_DEVICE_INLINE WaitResult wait_credit_cached(uint64_t pos, uint64_t& acked, const Deadline& d) const {
    const uint64_t* in = semaphore.inbound;
    const uint64_t n = depth;
    uint64_t seen = acked;
    if (seen + n >= pos + 1) return WaitResult::Ok;
    const WaitResult r = spin_until([&] { return (seen = ld_acquire_sys(in)) + n >= pos + 1; }, d);
    acked = seen;
    return r;
  }
  /// Message `pos`'s Simple slot in the peer's memory (any thread).
  WEFT_DEVICE_INLINE char* send_slot(uint64_t pos) const { return remote + (pos % depth) * slot_bytes; }
  /// Message `pos`'s LL slot in the peer's memory (any thread).
  WEFT_DEVICE_INLINE LLPacket* send_packets(uint64_t pos) const {
    return reinterpret_cast<LLPacket*>(reinterpret_cast<char*>(packets_out) + (pos % depth) * packet_slot_bytes);
  }
  /// After a __syncthreads that follows the block's writes of message `pos`: publishes it.
  /// The release store makes those writes visible to the receiver before the count.
  WEFT_DEVICE_INLINE void post(uint64_t pos) const {
    st_release_sys(semaphore.outbound, pos + 1);
    *semaphore.signalled = pos + 1;
  }
  /// post for either kind of FIFO: `bytes` (at most slot_bytes) is how much of the slot
  /// the block wrote. Across the network, one thread pushes a put-with-signal trigger to
  /// the proxy (waiting, bounded, while its FIFO is full; Aborted when the proxy failed).
  WEFT_DEVICE_INLINE WaitResult post(uint64_t pos, uint64_t bytes, const Deadline& d) const {
    if (net == nullptr) {
      post(pos);
      return WaitResult::Ok;
    }
    return net_post(pos, bytes, d);
  }
  /// post's network half, out of line so that it costs the callers' hot path no registers.
  WEFT_DEVICE_INLINE WaitResult net_post(uint64_t pos, uint64_t bytes, const Deadline& d) const {
    __threadfence_system();  // the block's writes to the staging slot reach host memory first
    const NetFifoDeviceHandle* n = net;
    const uint64_t off = (pos % depth) * slot_bytes;  // bytes <= slot_bytes < 4 GiB: one trigger
    FifoDeviceHandle f = n->port.fifo;
    uint64_t index = 0;
    WaitResult r = f.push(ProxyTrigger::make(kTriggerPut | kTriggerSignal, n->port.channel, n->port.dst_mem,
                                             n->dst_base + off, n->port.src_mem, n->src_base + off, bytes),
                          index, d);
    if (r == WaitResult::Ok) *semaphore.signalled = pos + 1;
    return r;
  }
  /// As post, for a message sent as LL packets: they carry their own flags, so the count
  /// (kept so that Simple and LL messages share one numbering) needs no fence.
  WEFT_DEVICE_INLINE void post_packets(uint64_t pos) const {
    *reinterpret_cast<volatile uint64_t*>(semaphore.outbound) = pos + 1;
    *semaphore.signalled = pos + 1;
  }

  // ---- FIFO, receive end ----
  /// Messages this end has consumed so far.
  WEFT_DEVICE_INLINE uint64_t recv_position() const { return *semaphore.waited; }
  /// Waits until the sender has posted message `pos` (Simple; LL messages are polled packet by packet).
  WEFT_DEVICE_INLINE WaitResult wait_posted(uint64_t pos, const Deadline& d) const {
    const uint64_t* posted = semaphore.inbound;
    return spin_until([&] { return ld_acquire_sys(posted) >= pos + 1; }, d);
  }
  /// As wait_posted, with `posted` the last posted count this end saw, kept by the caller
  /// as wait_credit_cached's `acked`.
  WEFT_DEVICE_INLINE WaitResult wait_posted_cached(uint64_t pos, uint64_t& posted, const Deadline& d) const {
    const uint64_t* in = semaphore.inbound;
    uint64_t seen = posted;
    if (seen >= pos + 1) return WaitResult::Ok;
    const WaitResult r = spin_until([&] { return (seen = ld_acquire_sys(in)) >= pos + 1; }, d);
    posted = seen;
    return r;
  }
  /// Message `pos`'s Simple slot in this rank's memory (any thread).
  WEFT_DEVICE_INLINE const char* recv_slot(uint64_t pos) const { return local + (pos % depth) * slot_bytes; }
  /// Message `pos`'s LL slot in this rank's memory (any thread).
  WEFT_DEVICE_INLINE const LLPacket* recv_packets(uint64_t pos) const {
    return reinterpret_cast<const LLPacket*>(reinterpret_cast<const char*>(packets_in) + (pos % depth) * packet_slot_bytes);
  }
  /// After a __syncthreads that follows the block's reads of message `pos`: frees its slot.
  WEFT_DEVICE_INLINE void ack(uint64_t pos) const {
    st_release_sys(semaphore.outbound, pos + 1);
    *semaphore.waited = pos + 1;
  }
  /// ack for either kind of FIFO; across the network it pushes a signal trigger (the
  /// proxy writes the acked count into the sender's memory).
  WEFT_DEVICE_INLINE WaitResult ack(uint64_t pos, const Deadline& d) const {
    if (net == nullptr) {
      ack(pos);
      return WaitResult::Ok;
    }
    return net_ack(pos, d);
  }
  /// ack's network half, out of line as net_post.
  WEFT_DEVICE_INLINE WaitResult net_ack(uint64_t pos, const Deadline& d) const {
    FifoDeviceHandle f = net->port.fifo;
    uint64_t index = 0;
    WaitResult r = f.push(ProxyTrigger::make(kTriggerSignal, net->port.channel, 0, 0, 0, 0, 0), index, d);
    if (r == WaitResult::Ok) *semaphore.waited = pos + 1;
    return r;
  }
  /// As ack, after LL reads: their values were used before the barrier, so no fence.
  WEFT_DEVICE_INLINE void ack_packets(uint64_t pos) const {
    *reinterpret_cast<volatile uint64_t*>(semaphore.outbound) = pos + 1;
    *semaphore.waited = pos + 1;
  }
  // ---- FIFO, split publishing (the interpreter's posting warp, WEFT_POST_WARP) ----
  // The thread that takes a position moves this end's own count at once (*signalled or
  // *waited = pos + 1, so that its next message takes the next position), and another warp
  // publishes to the peer later, in order, after a barrier with the block's movers:
  /// post(pos)'s peer-visible half: the release store of the posted count.
  WEFT_DEVICE_INLINE void publish_posted(uint64_t pos) const { st_release_sys(semaphore.outbound, pos + 1); }
  /// ack_packets(pos)'s peer-visible half: the acked count, without a fence (see ack_packets).
  WEFT_DEVICE_INLINE void publish_ack(uint64_t pos) const {
    *reinterpret_cast<volatile uint64_t*>(semaphore.outbound) = pos + 1;
  }
  /// What the peer has signalled so far (send end: acks; receive end: posts), for error reports.
  WEFT_DEVICE_INLINE uint64_t peer_count() const { return ld_acquire_sys(semaphore.inbound); }
#endif
};
static_assert(std::is_trivially_copyable_v<MemoryChannelDeviceHandle>);

}  // namespace weft::device
