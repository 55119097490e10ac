// The progression-engine path's host logic (part/progress.hpp): the transfer path from its
// names and from WEFT_PART_PATH, the mapping of a transport partition the device marked
// ready to the engine's put (offset, bytes, the receiver's flag word), and the checks on
// every number before a transfer: index out of range, a flag from a future epoch, buffers
// or flag blocks too small for the partitions the peer agreed to.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "part/progress.hpp"
#include "part/state.hpp"
#include "util/error.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

ProgressJobDesc job(uint32_t partitions, uint32_t threshold, uint64_t pb) {
  ProgressJobDesc d;
  d.who = "rank 0: psend to rank 1 (tag 3)";
  d.partitions = partitions;
  d.threshold = threshold;
  d.partition_bytes = pb;
  d.send_bytes = d.remote_bytes = partitions * pb;
  d.remote_flag_words = kFlagFirst + partitions;
  return d;
}

template <class F>
std::string error_of(F f, weft::ErrorCode want) {
  try {
    f();
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

}  // namespace

TEST(PartProgress, PathNames) {
  EXPECT_EQ(parse_transfer_path(""), TransferPath::Kernel);
  EXPECT_EQ(parse_transfer_path("kernel"), TransferPath::Kernel);
  EXPECT_EQ(parse_transfer_path("proxy"), TransferPath::Proxy);
  const std::string m = error_of([] { parse_transfer_path("nvlink"); }, weft::ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("WEFT_PART_PATH='nvlink'"), std::string::npos) << m;
  EXPECT_EQ(resolve_transfer_path(1), TransferPath::Kernel);
  EXPECT_EQ(resolve_transfer_path(2), TransferPath::Proxy);
  error_of([] { resolve_transfer_path(7); }, weft::ErrorCode::InvalidArgument);
}

TEST(PartProgress, PathFromEnvironment) {
  ::setenv("WEFT_PART_PATH", "proxy", 1);
  EXPECT_EQ(resolve_transfer_path(0), TransferPath::Proxy);
  EXPECT_EQ(resolve_transfer_path(1), TransferPath::Kernel);  // an explicit path wins
  ::setenv("WEFT_PART_PATH", "PROXY", 1);
  error_of([] { resolve_transfer_path(0); }, weft::ErrorCode::InvalidArgument);
  ::unsetenv("WEFT_PART_PATH");
  EXPECT_EQ(resolve_transfer_path(0), TransferPath::Kernel);
}

// Every byte of every user partition is covered exactly once by the puts of its transport
// partitions, each put ends its transport partition's flag, for every threshold.
TEST(PartProgress, PutsCoverEveryPartitionOnce) {
  for (uint32_t U : {1u, 5u, 8u, 13u})
    for (uint32_t thr = 1; thr <= U; ++thr) {
      const uint64_t pb = 24;
      const ProgressJobDesc d = job(U, thr, pb);
      check_progress_job(d);
      std::vector<int> covered(U * pb, 0);
      const uint32_t T = transport_partitions(U, thr);
      for (uint32_t t = 0; t < T; ++t) {
        bool pending = false;
        const TransportPut p = plan_transport_put(d, t, 4, 4, &pending);
        EXPECT_TRUE(pending);
        EXPECT_EQ(p.flag_word, kFlagFirst + t);
        EXPECT_EQ(p.epoch, 4u);
        EXPECT_EQ(p.offset % pb, 0u);
        EXPECT_EQ(p.bytes, transport_size(U, thr, t) * pb);
        for (uint64_t b = p.offset; b < p.offset + p.bytes; ++b) ++covered.at(b);
        // The user partitions in it are the ones transport_of maps to t.
        for (uint64_t b = p.offset; b < p.offset + p.bytes; b += pb)
          EXPECT_EQ(transport_of(static_cast<uint32_t>(b / pb), thr), t);
      }
      for (size_t b = 0; b < covered.size(); ++b) ASSERT_EQ(covered[b], 1) << "U " << U << " thr " << thr << " byte " << b;
    }
}

TEST(PartProgress, OlderEpochIsNotPending) {
  const ProgressJobDesc d = job(4, 2, 8);
  bool pending = true;
  plan_transport_put(d, 1, 2, 3, &pending);
  EXPECT_FALSE(pending);
  plan_transport_put(d, 0, 0, 1, &pending);
  EXPECT_FALSE(pending);
  plan_transport_put(d, 0, 0, 0, &pending);  // a paused job (epoch 0) sends nothing
  EXPECT_FALSE(pending);
}

TEST(PartProgress, BadNumbersAreRefused) {
  const ProgressJobDesc d = job(6, 4, 16);  // 2 transport partitions
  bool pending = true;
  std::string m = error_of([&] { plan_transport_put(d, 2, 1, 1, &pending); }, weft::ErrorCode::Internal);
  EXPECT_NE(m.find("transport partition 2 out of range (2)"), std::string::npos) << m;
  EXPECT_NE(m.find("psend to rank 1"), std::string::npos) << m;
  EXPECT_FALSE(pending);
  m = error_of([&] { plan_transport_put(d, 0, 9, 3, &pending); }, weft::ErrorCode::Internal);
  EXPECT_NE(m.find("epoch 9 while the request is in epoch 3"), std::string::npos) << m;

  ProgressJobDesc small = d;
  small.remote_bytes = 6 * 16 - 1;
  m = error_of([&] { check_progress_job(small); }, weft::ErrorCode::Remote);
  EXPECT_NE(m.find("receiver's buffer holds 95 bytes"), std::string::npos) << m;
  // Even unchecked, the put that would overrun the receiver is refused.
  m = error_of([&] { plan_transport_put(small, 1, 1, 1, &pending); }, weft::ErrorCode::Remote);
  EXPECT_NE(m.find("does not fit the receiver's buffer"), std::string::npos) << m;

  ProgressJobDesc flags = job(6, 1, 16);
  flags.remote_flag_words = kFlagFirst + 5;
  m = error_of([&] { check_progress_job(flags); }, weft::ErrorCode::Remote);
  EXPECT_NE(m.find("flag block holds 7 words"), std::string::npos) << m;
  error_of([&] { plan_transport_put(flags, 5, 1, 1, &pending); }, weft::ErrorCode::Remote);

  ProgressJobDesc thr = d;
  thr.threshold = 7;
  error_of([&] { check_progress_job(thr); }, weft::ErrorCode::InvalidUsage);
  thr.threshold = 0;
  error_of([&] { check_progress_job(thr); }, weft::ErrorCode::InvalidUsage);
  ProgressJobDesc send = d;
  send.send_bytes = 10;
  error_of([&] { check_progress_job(send); }, weft::ErrorCode::InvalidUsage);
}
