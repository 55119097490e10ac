#include <gtest/gtest.h>

#include "ir/algorithm.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

Algorithm ring_allgather(int n) {
  Algorithm a;
  a.name = "ring";
  a.collective = Collective::AllGather;
  a.ranks = n;
  a.input_chunks = 1;
  a.output_chunks = n;
  a.in_place = true;
  for (int s = 0; s < n - 1; ++s)
    for (int r = 0; r < n; ++r) {
      int c = (r - s + n) % n;
      a.transfers.push_back({r, Buffer::Output, c, (r + 1) % n, Buffer::Output, c, 1, TransferOp::Copy, s});
    }
  return a;
}

TEST(Algorithm, ShapeOfRingPasses) {
  Algorithm a = ring_allgather(4);
  EXPECT_NO_THROW(check_shape(a));
  EXPECT_EQ(a.num_steps(), 3);
}

TEST(Algorithm, RankOutOfRangeNamesTheTransfer) {
  Algorithm a = ring_allgather(4);
  a.transfers[2].dst_rank = 7;
  try {
    check_shape(a);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("transfer 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("destination rank 7"), std::string::npos) << e.what();
  }
}

TEST(Algorithm, WrongOutputChunksRejected) {
  Algorithm a = ring_allgather(4);
  a.output_chunks = 3;
  EXPECT_THROW(check_shape(a), Error);
}

TEST(Algorithm, CanonicalSlotInPlace) {
  Algorithm a = ring_allgather(4);
  SlotRef s = canonical_slot(a, {2, Buffer::Input, 0});
  EXPECT_EQ(s, (SlotRef{2, Buffer::Output, 2}));
  a.in_place = false;
  EXPECT_EQ(canonical_slot(a, {2, Buffer::Input, 0}), (SlotRef{2, Buffer::Input, 0}));

  Algorithm rs;
  rs.collective = Collective::ReduceScatter;
  rs.ranks = 4;
  rs.input_chunks = 8;
  rs.output_chunks = 2;
  rs.in_place = true;
  EXPECT_EQ(canonical_slot(rs, {3, Buffer::Output, 1}), (SlotRef{3, Buffer::Input, 7}));
}

TEST(Algorithm, CollectiveNames) {
  EXPECT_EQ(collective_from_string("Allreduce"), Collective::AllReduce);
  EXPECT_EQ(collective_from_string("Reducescatter"), Collective::ReduceScatter);
  EXPECT_EQ(collective_from_string("all_to_all"), Collective::AllToAll);
  EXPECT_FALSE(collective_from_string("allsum").has_value());
}

}  // namespace
}  // namespace weft
