// The verifier accepts every built-in algorithm (built in C++) at the shapes it supports.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/verify.hpp"

namespace weft {
namespace {

using namespace weft::test;

std::string explain(const VerifyResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += "\n  " + e;
  return s;
}

#define EXPECT_VERIFIES(algo)                                                        \
  do {                                                                               \
    Algorithm a_ = (algo);                                                           \
    VerifyResult r_ = verify(a_);                                                    \
    EXPECT_TRUE(r_.ok) << a_.name << " at " << a_.ranks << " ranks:" << explain(r_); \
  } while (0)

const int kRanks[] = {1, 2, 4, 8, 16, 32};
// (nodes, GPUs per node) shapes for the hierarchical algorithms.
const std::pair<int, int> kShapes[] = {{1, 1}, {1, 2}, {1, 8}, {2, 1}, {2, 2}, {2, 4},
                                       {3, 2}, {4, 4}, {4, 8}, {8, 1}, {2, 8}, {8, 4}};

TEST(VerifyAccepts, RingAlgorithms) {
  for (int r : kRanks) {
    EXPECT_VERIFIES(ring_allgather(r));
    EXPECT_VERIFIES(ring_reducescatter(r));
    EXPECT_VERIFIES(ring_allreduce(r));
  }
}

TEST(VerifyAccepts, AllPairsAlgorithms) {
  for (int r : kRanks) {
    EXPECT_VERIFIES(allpairs_allreduce(r));
    EXPECT_VERIFIES(allpairs_allgather(r));
    EXPECT_VERIFIES(allpairs_reducescatter(r));
    EXPECT_VERIFIES(alltoall_direct(r));
  }
}

TEST(VerifyAccepts, ChainsFromEveryRoot) {
  for (int r : kRanks)
    for (int root : {0, r / 2, r - 1}) {
      EXPECT_VERIFIES(chain_broadcast(r, root));
      EXPECT_VERIFIES(chain_reduce(r, root));
    }
}

TEST(VerifyAccepts, HierarchicalAlgorithms) {
  for (auto [n, g] : kShapes) {
    EXPECT_VERIFIES(hm_allgather(n, g));
    EXPECT_VERIFIES(hm_allreduce(n, g));
    EXPECT_VERIFIES(alltoall_twostep(n, g));
    EXPECT_VERIFIES(alltonext(n, g));
  }
}

TEST(VerifyAccepts, CountsOfTheHierarchicalAllReduce) {
  // 2*R*N*(G-1) mesh transfers plus 2*R*(N-1) ring transfers, in (G-1) + (N-1) + N steps.
  Algorithm a = hm_allreduce(4, 8);
  EXPECT_EQ(a.transfers.size(), size_t(2 * 32 * 4 * 7 + 2 * 32 * 3));
  EXPECT_EQ(a.num_steps(), 7 + 3 + 4);
  VerifyResult r = verify(a);
  EXPECT_TRUE(r.ok) << explain(r);
  EXPECT_EQ(r.error_count, 0u);
  EXPECT_GT(r.peak_state_bytes, 0u);
}

}  // namespace
}  // namespace weft
