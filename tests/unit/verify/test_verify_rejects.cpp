// The verifier rejects broken variants of the built-ins, each with the message it should give.
#include <gtest/gtest.h>

#include <algorithm>

#include "builders.hpp"
#include "compile/verify.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using namespace weft::test;

/// Verifies `a`, expects failure, and returns the first message.
std::string first_error(const Algorithm& a) {
  VerifyResult r = verify(a);
  EXPECT_FALSE(r.ok) << a.name << " should fail verification";
  EXPECT_GE(r.error_count, r.errors.size());
  return r.errors.empty() ? std::string() : r.errors.front();
}

/// Index of the first transfer matching the predicate.
template <class F>
size_t find_transfer(const Algorithm& a, F f) {
  auto it = std::find_if(a.transfers.begin(), a.transfers.end(), f);
  EXPECT_NE(it, a.transfers.end());
  return static_cast<size_t>(it - a.transfers.begin());
}

TEST(VerifyRejects, MissingTransferLeavesAnEmptyRead) {
  // Ring AllGather on 4 ranks without rank 0's first send: rank 1 forwards chunk 0 at step 1
  // without having it.
  Algorithm a = ring_allgather(4);
  a.transfers.erase(a.transfers.begin());
  EXPECT_EQ(first_error(a),
            "step 1, transfer 4 (copy rank 1's output chunk 0 to rank 2's output chunk 0): reads rank 1's output chunk "
            "0, which is empty at this step");
}

TEST(VerifyRejects, MissingLastTransferFailsThePostcondition) {
  Algorithm a = ring_allgather(4);
  a.transfers.pop_back();  // rank 3 -> rank 0 at step 2, chunk 1
  EXPECT_EQ(first_error(a), "at the end, rank 0's output chunk 1 is empty, but should hold rank 1's input chunk 0");
}

TEST(VerifyRejects, MissingReductionNamesTheMissingContribution) {
  // Ring AllReduce without the first reduction into rank 1's chunk 0: rank 0's contribution
  // never reaches chunk 0.
  Algorithm a = ring_allreduce(4);
  size_t i = find_transfer(a, [](const Transfer& t) { return t.step == 0 && t.src_rank == 1; });
  a.transfers.erase(a.transfers.begin() + i);
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors[0].find("at the end, rank "), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[0].find("holds 3 contributions, 3 of the 4 expected; missing rank 1's input chunk 0"),
            std::string::npos)
      << r.errors[0];
  EXPECT_EQ(r.error_count, 4u);  // chunk 0 is wrong on every rank
}

TEST(VerifyRejects, WrongChunk) {
  // Rank 2 sends chunk 3 instead of chunk 2 at step 0 of a ring AllGather: rank 2 has no chunk 3 yet.
  Algorithm a = ring_allgather(4);
  size_t i = find_transfer(a, [](const Transfer& t) { return t.step == 0 && t.src_rank == 2; });
  a.transfers[i].src_index = a.transfers[i].dst_index = 3;
  EXPECT_EQ(first_error(a),
            "step 0, transfer 2 (copy rank 2's output chunk 3 to rank 3's output chunk 3): reads rank 2's output chunk "
            "3, which is empty at this step");
}

TEST(VerifyRejects, WrongDestinationChunkGivesExtraAndMissing) {
  // Chain broadcast where the last hop writes chunk 1 into slot 0: slot 0 holds the wrong data.
  Algorithm a = chain_broadcast(3, 0);
  a.transfers.back().dst_index = 0;  // hop 1, chunk 2 -> slot 0
  EXPECT_EQ(first_error(a),
            "at the end, rank 2's output chunk 0 holds 1 contribution, 0 of the 1 expected; missing rank 0's input "
            "chunk 0; unexpected rank 0's input chunk 2 (last written at step 3 by transfer 5)");
}

TEST(VerifyRejects, WriteWriteRace) {
  // Two ranks send into rank 1's chunk 0 in the same step.
  Algorithm a = allpairs_allgather(3);
  a.transfers.push_back({2, Buffer::Output, 2, 1, Buffer::Output, 0, 1, TransferOp::Copy, 0});
  std::string e = first_error(a);
  EXPECT_EQ(e.find("step 0, transfer "), 0u) << e;
  EXPECT_NE(e.find("writes rank 1's output chunk 0, which transfer "), std::string::npos) << e;
  EXPECT_NE(e.find("also writes in the same step (a race)"), std::string::npos) << e;
}

TEST(VerifyRejects, ReadWriteRace) {
  // Ring AllGather with step 1 renumbered to 0: rank 1 forwards chunk 0 while receiving it.
  Algorithm a = ring_allgather(3);
  for (Transfer& t : a.transfers) t.step = 0;
  std::string e = first_error(a);
  EXPECT_NE(e.find("(a race)"), std::string::npos) << e;
  EXPECT_NE(e.find("step 0"), std::string::npos) << e;
}

TEST(VerifyRejects, StepsOutOfOrder) {
  // Ring AllReduce with the AllGather phase numbered before the ReduceScatter phase: the first
  // AllGather step sends chunks that are not reduced yet, and its writes race with the
  // ReduceScatter's reads of the same step.
  Algorithm a = ring_allreduce(4);
  for (Transfer& t : a.transfers) t.step = t.op == TransferOp::Copy ? t.step - 3 : t.step + 3;
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  // Step 0 now copies unreduced chunks; step 3 reduces ranks' chunks into copies of each other:
  // contributions get counted twice.
  bool twice = std::any_of(r.errors.begin(), r.errors.end(),
                           [](const std::string& e) { return e.find("twice") != std::string::npos; });
  EXPECT_TRUE(twice) << r.errors[0];
}

TEST(VerifyRejects, DoubleReduce) {
  // Ring ReduceScatter with one reduction repeated two steps later (when neither slot is busy):
  // rank 1's chunk 3 already holds rank 0's contribution.
  Algorithm a = ring_reducescatter(4);
  Transfer t = a.transfers[0];  // rank 0 -> rank 1, chunk 3, step 0
  t.step = 2;
  t.dst_rank = 1;
  a.transfers.push_back(t);
  std::string e = first_error(a);
  EXPECT_NE(e.find("step 2, transfer 12 (reduce rank 0's input chunk 3 into rank 1's input chunk 3): counts rank 0's "
                   "input chunk 3 twice"),
            std::string::npos)
      << e;
}

TEST(VerifyRejects, ReduceIntoItself) {
  Algorithm a = ring_allreduce(2);
  a.transfers.push_back({0, Buffer::Output, 0, 0, Buffer::Output, 0, 1, TransferOp::Reduce, 5});
  std::string e = first_error(a);
  EXPECT_NE(e.find("counts rank 0's input chunk 0 twice"), std::string::npos) << e;
}

TEST(VerifyRejects, RankOutOfRange) {
  Algorithm a = ring_allgather(4);
  a.transfers[5].dst_rank = 4;
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "step 1, transfer 5: destination rank 4 is out of range [0, 4)");
}

TEST(VerifyRejects, ChunkOutOfRange) {
  Algorithm a = ring_allgather(4);
  a.transfers[1].src_index = 4;
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors[0].find("source chunks [4, 5) of the output buffer on rank 1 are out of range [0, 4)"),
            std::string::npos)
      << r.errors[0];
}

TEST(VerifyRejects, ReduceIntoEmptyScratch) {
  Algorithm a = allpairs_reducescatter(3);
  // Scratch chunk 1 of rank 1 is never written (no rank sends to itself).
  a.transfers.push_back({0, Buffer::Input, 0, 1, Buffer::Scratch, 1, 1, TransferOp::Reduce, 0});
  std::string e = first_error(a);
  EXPECT_NE(e.find("reduces into rank 1's scratch chunk 1, which is empty at this step"), std::string::npos) << e;
}

TEST(VerifyRejects, WrongCustomPostcondition) {
  // AllToNext whose postcondition claims rank 1 ends with rank 1's own chunk 0.
  Algorithm a = alltonext(2, 2);
  a.custom_postcondition[0].contributions = {{1, 0}};
  EXPECT_EQ(first_error(a),
            "at the end, rank 1's output chunk 0 holds 1 contribution, 0 of the 1 expected; missing rank 1's input "
            "chunk 0; unexpected rank 0's input chunk 0 (last written at step 0 by transfer 0)");
}

TEST(VerifyRejects, CustomPostconditionAccumulates) {
  // Two expectations on one slot form a reduction that the copy does not produce.
  Algorithm a = alltonext(1, 2);
  a.custom_postcondition.push_back({{1, Buffer::Output, 0}, {{1, 0}}});
  EXPECT_EQ(first_error(a),
            "at the end, rank 1's output chunk 0 holds 1 contribution, 1 of the 2 expected; missing rank 1's input "
            "chunk 0 (last written at step 0 by transfer 0)");
}

TEST(VerifyRejects, CustomPostconditionOutOfRange) {
  Algorithm a = alltonext(1, 2);
  a.custom_postcondition.push_back({{2, Buffer::Output, 0}, {{0, 0}}});
  std::string e = first_error(a);
  EXPECT_NE(e.find("postcondition names rank 2's output chunk 0, which is out of range"), std::string::npos) << e;
}

TEST(VerifyRejects, ReduceOnlyConstrainsTheRoot) {
  // A chain reduce to root 2 that also leaves partial sums elsewhere verifies; one that
  // misses a hop does not.
  Algorithm a = chain_reduce(4, 2);
  EXPECT_TRUE(verify(a).ok);
  size_t i = find_transfer(a, [](const Transfer& t) { return t.src_rank == 3; });  // first hop from rank 3
  a.transfers.erase(a.transfers.begin() + i);
  std::string e = first_error(a);
  EXPECT_NE(e.find("at the end, rank 2's output chunk 0"), std::string::npos) << e;
  EXPECT_NE(e.find("missing rank 3's input chunk 0"), std::string::npos) << e;
}

TEST(VerifyRejects, MessagesCarryTheSourceLocation) {
  Algorithm a = ring_allgather(4);
  a.source_file = "ring.rccl";
  for (size_t i = 0; i < a.transfers.size(); ++i) a.transfer_locations.push_back({7, 9, 0});
  a.transfer_locations[4] = {12, 5, 0};
  a.transfers.erase(a.transfers.begin());
  a.transfer_locations.erase(a.transfer_locations.begin());
  std::string e = first_error(a);
  EXPECT_EQ(e.find("ring.rccl:7:9: step 1, transfer 4"), 0u) << e;
}

TEST(VerifyRejects, ErrorsAreCappedButCounted) {
  Algorithm a = ring_allgather(8);
  a.transfers.resize(8);  // only step 0
  VerifyOptions opt;
  opt.max_errors = 3;
  VerifyResult r = verify(a, opt);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.error_count, size_t(8 * 8 - 8 - 8));  // every slot but the own and the one received
}

TEST(VerifyRejects, OverlappingRanges) {
  Algorithm a = ring_allreduce(4);
  a.transfers.push_back({0, Buffer::Output, 0, 0, Buffer::Output, 1, 2, TransferOp::Copy, 20});
  std::string e = first_error(a);
  EXPECT_NE(e.find("source and destination ranges of 2 chunks overlap"), std::string::npos) << e;
}

TEST(VerifyRejects, MemoryBudget) {
  Algorithm a = hm_allreduce(4, 8);
  VerifyOptions opt;
  opt.max_memory_bytes = 1 << 12;
  VerifyResult r = verify(a, opt);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors[0].find("too large to verify"), std::string::npos) << r.errors[0];
}

TEST(VerifyRejects, InPlaceCustomNeedsOneBuffer) {
  Algorithm a = alltonext(1, 2);
  a.in_place = true;
  a.output_chunks = 3;
  std::string e = first_error(a);
  EXPECT_NE(e.find("in-place Custom collective needs as many input chunks as output chunks"), std::string::npos) << e;
}

TEST(VerifyRejects, VerifyOrThrow) {
  Algorithm a = ring_allgather(4);
  a.transfers.pop_back();
  try {
    verify_or_throw(a);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("ring_allgather fails verification:\n  at the end"), std::string::npos);
  }
  EXPECT_NO_THROW(verify_or_throw(ring_allgather(4)));
}

}  // namespace
}  // namespace weft
