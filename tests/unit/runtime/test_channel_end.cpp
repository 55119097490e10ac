// The host half of memory channels (exec/channel_end.hpp): the two ends of one FIFO
// direction, made from the same memory as each process addresses it, must point at the
// same slots and counters, each end at its own position counter; a user channel's release
// runs once, with its last copy.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "exec/exec_plan.hpp"
#include "exec/channel_end.hpp"

namespace weft::exec {
namespace {

TEST(ChannelEnd, FifoEndsAgree) {
  std::vector<char> receiver(4096), sender(4096);
  uint64_t* posted = reinterpret_cast<uint64_t*>(receiver.data());
  uint64_t* recv_pos = posted + 8;
  uint64_t* acked = reinterpret_cast<uint64_t*>(sender.data());
  uint64_t* send_pos = acked + 8;
  char* slots = receiver.data() + 1024;
  char* packet_slots = receiver.data() + 2048;
  const FifoShape shape{4, 256, 128};
  const ChannelEnd s = ChannelEnd::fifo_send(1, shape, FifoMemory{slots, packet_slots, posted, acked, send_pos});
  const ChannelEnd r = ChannelEnd::fifo_recv(0, shape, FifoMemory{slots, packet_slots, posted, acked, recv_pos});
  const ChannelHandle& hs = s.device_handle();
  const ChannelHandle& hr = r.device_handle();
  EXPECT_EQ(s.peer(), 1);
  EXPECT_EQ(r.peer(), 0);
  // Data: the sender writes the receiver's slots.
  EXPECT_EQ(hs.remote, slots);
  EXPECT_EQ(hr.local, slots);
  EXPECT_EQ(reinterpret_cast<char*>(hs.packets_out), packet_slots);
  EXPECT_EQ(reinterpret_cast<char*>(hr.packets_in), packet_slots);
  EXPECT_EQ(hs.local, nullptr);
  EXPECT_EQ(hr.remote, nullptr);
  // Counters: each end waits on what the other bumps.
  EXPECT_EQ(hs.semaphore.outbound, posted);
  EXPECT_EQ(hr.semaphore.inbound, posted);
  EXPECT_EQ(hr.semaphore.outbound, acked);
  EXPECT_EQ(hs.semaphore.inbound, acked);
  EXPECT_EQ(hs.semaphore.signalled, send_pos);
  EXPECT_EQ(hr.semaphore.waited, recv_pos);
  for (const ChannelHandle* h : {&hs, &hr}) {
    EXPECT_EQ(h->depth, 4u);
    EXPECT_EQ(h->slot_bytes, 256u);
    EXPECT_EQ(h->packet_slot_bytes, 128u);
  }
  static_assert(std::is_trivially_copyable_v<ChannelHandle>);
}

TEST(ChannelEnd, ReleaseRunsOnceWithTheLastCopy) {
  int released = 0;
  {
    device::MemoryChannelDeviceHandle h;
    h.peer = 3;
    ChannelEnd a(h, std::shared_ptr<void>(nullptr, [&](void*) { ++released; }));
    {
      ChannelEnd b = a;
      ChannelEnd c = a;
      EXPECT_EQ(c.peer(), 3);
    }
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

}  // namespace
}  // namespace weft::exec
