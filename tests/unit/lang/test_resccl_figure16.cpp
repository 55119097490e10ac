// Paper 001 Figure 16 (HM AllReduce, 32 GPUs on 4 nodes), rebuilt in
// tests/data/figure16_hm_allreduce.rccl: it parses at its defaults and at 1,024 ranks with
// the transfer count its loops imply, and a small symbolic execution shows that every rank
// ends with every chunk reduced over all ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "resccl_test_util.hpp"

namespace weft {
namespace {

const std::string kFile = std::string(WEFT_TEST_DATA_DIR) + "/tests/data/figure16_hm_allreduce.rccl";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Transfers the four phases' loops produce for R ranks, G per node (N = R / G nodes).
size_t expected_transfers(size_t R, size_t G) {
  size_t N = R / G;
  size_t intra = N * G * N * (G - 1);  // n, r, baseStep < N, offset < G-1
  size_t inter = N * G * (N - 1);      // n, r, baseStep < N-1
  return 2 * intra + 2 * inter;
}

/// A throwaway symbolic check of an in-place AllReduce on at most 64 ranks (the real
/// verifier lives in src/compile): each slot holds the set of ranks whose contribution it
/// carries, as a bit mask. Steps run in order; within a step every transfer reads the
/// state before the step, and two writes, or a read and a write, of one slot are a race.
/// Returns an empty string when every rank ends with every chunk reduced over all ranks.
std::string check_allreduce(const Algorithm& a) {
  const int R = a.ranks, C = a.output_chunks;
  if (R > 64) return "too many ranks for this check";
  std::vector<uint64_t> state(static_cast<size_t>(R) * C);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) state[static_cast<size_t>(r) * C + c] = uint64_t{1} << r;
  std::vector<size_t> order(a.transfers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return a.transfers[x].step < a.transfers[y].step; });
  auto slot = [&](int rank, int chunk) { return static_cast<size_t>(rank) * C + chunk; };
  for (size_t i = 0; i < order.size();) {
    const int step = a.transfers[order[i]].step;
    std::unordered_set<size_t> reads, writes;
    std::vector<std::pair<size_t, uint64_t>> copies, reduces;
    for (; i < order.size() && a.transfers[order[i]].step == step; ++i) {
      const Transfer& t = a.transfers[order[i]];
      std::string where = text::format("step %d: %d -> %d chunk %d: ", t.step, t.src_rank, t.dst_rank, t.src_index);
      if (t.count != 1 || t.src_buffer != Buffer::Output || t.dst_buffer != Buffer::Output ||
          t.src_index != t.dst_index)
        return where + "unexpected shape";
      if (t.src_rank < 0 || t.src_rank >= R || t.dst_rank < 0 || t.dst_rank >= R || t.src_index < 0 ||
          t.src_index >= C)
        return where + "out of range";
      size_t s = slot(t.src_rank, t.src_index), d = slot(t.dst_rank, t.dst_index);
      if (!writes.insert(d).second) return where + "two writes of one slot";
      reads.insert(s);
      (t.op == TransferOp::Copy ? copies : reduces).emplace_back(d, state[s]);
    }
    for (size_t w : writes)
      if (reads.count(w)) return text::format("step %d: a slot is read and written", step);
    for (auto [d, v] : copies) state[d] = v;
    for (auto [d, v] : reduces) {
      if (state[d] & v) return text::format("step %d: a contribution is reduced twice", step);
      state[d] |= v;
    }
  }
  const uint64_t all = R == 64 ? ~uint64_t{0} : (uint64_t{1} << R) - 1;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      if (state[slot(r, c)] != all)
        return text::format("rank %d chunk %d ends with contributions %llx", r, c,
                            static_cast<unsigned long long>(state[slot(r, c)]));
  return "";
}

TEST(Figure16, ParsesAtItsDefaults) {
  Algorithm a = load_algorithm(kFile);
  EXPECT_EQ(a.name, "HM");
  EXPECT_EQ(a.collective, Collective::AllReduce);
  EXPECT_EQ(a.ranks, 32);
  EXPECT_EQ(a.channels, 4);
  EXPECT_EQ(a.warps, 16);
  EXPECT_EQ(a.gpus_per_node, 8);
  EXPECT_EQ(a.nics_per_node, 8);
  EXPECT_EQ(a.input_chunks, 32);
  EXPECT_EQ(a.output_chunks, 32);
  EXPECT_TRUE(a.in_place);
  EXPECT_EQ(a.transfers.size(), expected_transfers(32, 8));
  EXPECT_EQ(a.transfers.size(), 1984u);
  EXPECT_EQ(a.transfer_locations.size(), a.transfers.size());
  // 4 * 7 intra-node ReduceScatter steps, 3 + 3 ring steps, 4 intra-node AllGather steps.
  EXPECT_EQ(a.num_steps(), 4 * 7 + 3 + 3 + 4);
  EXPECT_NO_THROW(check_shape(a));
  EXPECT_EQ(check_allreduce(a), "");
}

TEST(Figure16, EveryRankEndsWithEveryChunkFullyReducedAtOtherSizes) {
  const std::pair<int, int> sizes[] = {{8, 8}, {16, 4}, {16, 8}, {24, 8}, {64, 8}, {64, 16}, {6, 2}, {4, 1}};
  for (auto [R, G] : sizes) {
    SCOPED_TRACE(text::format("nRanks=%d GPUPerNode=%d", R, G));
    Algorithm a = load_algorithm(kFile, {{"nRanks", std::to_string(R)}, {"GPUPerNode", std::to_string(G)}});
    EXPECT_EQ(a.ranks, R);
    EXPECT_EQ(a.transfers.size(), expected_transfers(R, G));
    EXPECT_EQ(check_allreduce(a), "");
  }
}

TEST(Figure16, ParsesAt1024Ranks) {
  Algorithm a = load_algorithm(kFile, {{"nRanks", "1024"}});
  EXPECT_EQ(a.ranks, 1024);
  EXPECT_EQ(a.input_chunks, 1024);
  EXPECT_EQ(a.transfers.size(), expected_transfers(1024, 8));
  EXPECT_EQ(a.transfers.size(), 2095104u);
  EXPECT_EQ(a.num_steps(), 128 * 7 + 127 + 127 + 128);
  EXPECT_NO_THROW(check_shape(a));
}

TEST(Figure16, BrokenVariantsFailAtTheirLine) {
  const std::string text = read(kFile);
  ASSERT_FALSE(text.empty());
  // A comm type misspelled in the second phase.
  std::string bad = text;
  size_t at = bad.find("% nChunks, rrc)", bad.find("nNodes * (nGpusperNode - 1) + baseStep"));
  ASSERT_NE(at, std::string::npos);
  bad.replace(at + 11, 3, "rcc");
  std::string message = test::parse_error(bad);
  int line = static_cast<int>(std::count(bad.begin(), bad.begin() + at, '\n')) + 1;
  int column = static_cast<int>(at - bad.rfind('\n', at)) + 11;
  test::expect_error_at(bad, message, line, column, "unknown communication type 'rcc'");
  // nRanks must be a multiple of GPUPerNode (8 in the header).
  std::string m2 = test::parse_error(text, {{"nRanks", "12"}});
  EXPECT_NE(m2.find("nRanks (12) must be a multiple of GPUPerNode (8)"), std::string::npos) << m2;
}

}  // namespace
}  // namespace weft
