// weft's partitioned communication, C++ host API (MPI-4 partitioned semantics, paper 002).
//
//   auto ctx = weft::part::Context::create(comm);             // collective, once per communicator
//   auto send = ctx->psend_init(buf, partitions, count, weftFloat32, peer, tag);   // persistent
//   auto dreq = send->device_request_create(threshold);       // what the kernel needs
//   for (...) {
//     send->start();  send->pbuf_prepare();                   // the receiver is ready
//     kernel<<<...>>>(dreq->handle());                        // pready_{thread,warp,block}(p)
//     send->wait();
//   }
//
// The receiver mirrors it with precv_init, start, pbuf_prepare, then parrived (host or
// device) and wait / test. Requests are matched per (peer, tag) in the order of their first
// pbuf_prepare, which also sets the pair up (maps the receive buffer into the sender); later
// pbuf_prepare calls only exchange ready-to-receive. Collectives (pallreduce_init,
// pbcast_init) run on schedules of steps; their device request is Collective::handle().
// docs/partitioned.md describes semantics, errors and limits.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "weft/part/device.hpp"

namespace weft {
class Communicator;
}

namespace weft::part {

class Context;
class DeviceRequest;

/// A persistent partitioned send or receive request.
class Request {
 public:
  virtual ~Request() = default;
  /// Begins the next epoch. Error (InvalidUsage): the previous epoch has not completed.
  virtual void start() = 0;
  /// The first call sets the pair up with the peer (and checks that partitions, count and
  /// type match); every call makes sure the receive buffer is ready for this epoch: the
  /// receiver tells the sender, the sender waits for it (bounded by WEFT_TIMEOUT).
  virtual void pbuf_prepare() = 0;
  /// Host pready of partition p (send requests): copies it to the receiver, then signals
  /// its transport partition once complete. Do not mix with device pready in one epoch.
  virtual void pready(uint32_t p) = 0;
  /// Host parrived of partition p (receive requests).
  virtual bool parrived(uint32_t p) = 0;
  /// True once this epoch has completed (an inactive request is complete).
  virtual bool test() = 0;
  /// Waits (bounded by WEFT_TIMEOUT) for this epoch to complete.
  virtual void wait() = 0;
  /// For a send request: a device request whose handle a kernel uses to pready partitions;
  /// `threshold` user partitions make one transport partition (one signal to the receiver).
  /// Only while the request is not prepared for an epoch. One per request at a time.
  virtual std::unique_ptr<DeviceRequest> device_request_create(uint32_t threshold) = 0;
  /// For a receive request: the handle a kernel uses for parrived.
  virtual PrecvDeviceHandle recv_handle() = 0;
};

/// Owns the device memory of a send request's device side (counters, stamps).
class DeviceRequest {
 public:
  virtual ~DeviceRequest() = default;
  /// The handle to pass to kernels (valid once the request's first pbuf_prepare has run).
  virtual PsendDeviceHandle handle() const = 0;
  /// The same handle copied to device memory (for the C API), valid while this lives.
  virtual const PsendDeviceHandle* device_pointer() const = 0;
};

/// A partitioned collective (in place on `buf`).
class Collective {
 public:
  virtual ~Collective() = default;
  virtual void start() = 0;
  /// First call: sets up every neighbour pair of the schedule; later: ready-to-receive.
  /// Every rank of the communicator calls it (it waits for the neighbours).
  virtual void pbuf_prepare() = 0;
  virtual bool test() = 0;
  virtual void wait() = 0;
  /// Host parrived: partition u has finished on this rank.
  virtual bool parrived(uint32_t u) = 0;
  virtual PcollDeviceHandle handle() const = 0;
  virtual const PcollDeviceHandle* device_pointer() const = 0;
};

/// Partitioned communication on one communicator.
class Context {
 public:
  virtual ~Context() = default;
  /// Collective over the communicator's ranks: maps each rank's mailbox into the others.
  /// The context stays valid after the communicator is destroyed.
  static std::unique_ptr<Context> create(Communicator& comm);
  /// The same with a transfer path for its send requests: 0 WEFT_PART_PATH (default
  /// kernel), 1 kernel copy (the device pready copies), 2 progression engine (the device
  /// pready marks a flag in host-mapped memory, a host thread moves the data through a
  /// port-channel connection; paper 002). weftPartPath_t in the C API.
  static std::unique_ptr<Context> create(Communicator& comm, int path);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// `partitions` partitions of `count` elements of `dtype` each, contiguous from `buf`
  /// (device memory of this rank's GPU).
  virtual std::unique_ptr<Request> psend_init(const void* buf, uint32_t partitions, uint64_t count, int dtype,
                                              int peer, int tag) = 0;
  virtual std::unique_ptr<Request> precv_init(void* buf, uint32_t partitions, uint64_t count, int dtype, int peer,
                                              int tag) = 0;
  /// pbuf_prepare of several requests at once: sends are offered, then receives answered,
  /// then sends completed, so two ranks that send to each other do not wait on each other.
  virtual void pbuf_prepare_all(const std::vector<Request*>& requests) = 0;
  /// Ring AllReduce in place over `partitions` partitions of `count` elements each.
  /// dtype: float32, float64, int32, uint32, int64, uint64; op: sum, prod, max, min.
  virtual std::unique_ptr<Collective> pallreduce_init(void* buf, uint32_t partitions, uint64_t count, int dtype,
                                                      int op, int tag) = 0;
  /// Chain Broadcast from `root` in place.
  virtual std::unique_ptr<Collective> pbcast_init(void* buf, uint32_t partitions, uint64_t count, int dtype,
                                                  int root, int tag) = 0;
};

}  // namespace weft::part
