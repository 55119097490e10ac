#include "exec/channel_end.hpp"

namespace weft::exec {

namespace {

device::MemoryChannelDeviceHandle fifo_handle(int peer, const FifoShape& shape) {
  device::MemoryChannelDeviceHandle h;
  h.depth = shape.depth;
  h.slot_bytes = shape.slot_bytes;
  h.packet_slot_bytes = shape.packet_slot_bytes;
  h.peer = peer;
  return h;
}

}  // namespace

ChannelEnd ChannelEnd::fifo_send(int peer, const FifoShape& shape, const FifoMemory& mem) {
  device::MemoryChannelDeviceHandle h = fifo_handle(peer, shape);
  h.remote = mem.slots;
  h.packets_out = reinterpret_cast<device::LLPacket*>(mem.packet_slots);
  h.semaphore.inbound = mem.acked;
  h.semaphore.outbound = mem.posted;
  h.semaphore.signalled = mem.position;
  return ChannelEnd(h, nullptr);
}

ChannelEnd ChannelEnd::fifo_recv(int peer, const FifoShape& shape, const FifoMemory& mem) {
  device::MemoryChannelDeviceHandle h = fifo_handle(peer, shape);
  h.local = mem.slots;
  h.packets_in = reinterpret_cast<device::LLPacket*>(mem.packet_slots);
  h.semaphore.inbound = mem.posted;
  h.semaphore.outbound = mem.acked;
  h.semaphore.waited = mem.position;
  return ChannelEnd(h, nullptr);
}

}  // namespace weft::exec
