// Reduce chains in another order (compile/chain_order.hpp; CompileOptions::chain_keys and
// op_order): which runs of reductions count as chains, that reordering them keeps the values,
// and that plans compiled with them verify.
#include <gtest/gtest.h>

#include <algorithm>

#include "builders.hpp"
#include "compile/chain_order.hpp"
#include "compile/compiler.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "ir/plan_json.hpp"
#include "lang/load.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// "" when every lane of the plan's replay verifies.
std::string replay_errors(const Plan& plan) {
  for (int32_t lane = 0; lane < plan_lanes(plan); ++lane) {
    const VerifyResult v = verify(replay_plan(plan, lane));
    if (!v.ok) return "lane " + std::to_string(lane) + ": " + (v.errors.empty() ? "" : v.errors[0]);
  }
  return "";
}

TEST(ChainOrder, EachChunksIntraNodeReductionsAreOneChain) {
  // HM AllReduce (the built-in) on 2 nodes of 4: each rank reduces its 2 chunks from its 3
  // local peers, one after the other. The inter-node reduction that follows is no part of
  // the chain: its source, the peer node's partial sum, is still being reduced meanwhile.
  // In Figure 16's form the intra-node phase takes twice the steps and that source is
  // complete before the second chunk's chain begins: that chain takes it in as a fourth.
  const Algorithm a = load_algorithm("hm_allreduce", {{"nRanks", "8"}, {"GPUPerNode", "4"}});
  const Algorithm f = test::hm_allreduce(2, 4);
  for (const Algorithm* x : {&a, &f}) {
    const auto chains = reduce_chains(*x);
    ASSERT_EQ(chains.size(), 16u);
    int32_t across = 0;
    for (const auto& c : chains) {
      ASSERT_GE(c.size(), 3u);
      for (size_t i = 0; i < c.size(); ++i) {
        const Transfer& t = x->transfers[static_cast<size_t>(c[i])];
        EXPECT_EQ(t.op, TransferOp::Reduce);
        EXPECT_EQ(t.dst(), x->transfers[static_cast<size_t>(c[0])].dst());
        if (i > 0) {
          EXPECT_LT(x->transfers[static_cast<size_t>(c[i - 1])].step, t.step);
        }
        across += t.dst_rank / 4 != t.src_rank / 4;
      }
    }
    EXPECT_EQ(across, x == &a ? 0 : 8);
  }
}

TEST(ChainOrder, ARunStopsWhereTheDestinationIsReadOrASourceChanges) {
  // Into rank 0's chunk 0 from ranks 1, 2 and 3. (a) Rank 0's chunk is read between the
  // second and the third: only the first two are a chain. (b) Rank 1's chunk, the first
  // one's source, is overwritten before the second: only the last two are a chain.
  Algorithm a = test::resccl("a", Collective::AllReduce, 4);
  test::transfer(a, 1, 0, 0, 0, true);
  test::transfer(a, 2, 0, 1, 0, true);
  test::transfer(a, 0, 3, 2, 0, false);
  test::transfer(a, 3, 0, 3, 0, true);
  EXPECT_EQ(reduce_chains(a), (std::vector<std::vector<int32_t>>{{0, 1}}));
  Algorithm b = test::resccl("b", Collective::AllReduce, 4);
  test::transfer(b, 1, 0, 0, 0, true);
  test::transfer(b, 2, 1, 1, 0, false);
  test::transfer(b, 2, 0, 2, 0, true);
  test::transfer(b, 3, 0, 3, 0, true);
  EXPECT_EQ(reduce_chains(b), (std::vector<std::vector<int32_t>>{{2, 3}}));
}

TEST(ChainOrder, ChainsInAnotherOrderKeepTheValuesAndCompileToCorrectPlans) {
  // Every chain reversed on every other chunk (a key per transfer), the program in the
  // reverse of the steps where the graph lets it (op_order): the algorithm still verifies,
  // only chain members changed step, and the plans replay to the right values.
  const Topology t = test::a100(2, 4);
  const Algorithm a = test::hm_allreduce(2, 4);
  std::vector<double> keys(a.transfers.size(), 0.0);
  const auto chains = reduce_chains(a);
  for (size_t c = 0; c < chains.size(); ++c)
    for (size_t i = 0; i < chains[c].size(); ++i)
      keys[static_cast<size_t>(chains[c][i])] = c % 2 ? -static_cast<double>(i) : static_cast<double>(i);
  const Algorithm r = order_chains(a, keys);
  EXPECT_TRUE(verify(r).ok);
  int32_t moved = 0;
  std::vector<bool> member(a.transfers.size(), false);
  for (const auto& c : chains)
    for (int32_t x : c) member[static_cast<size_t>(x)] = true;
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    if (!member[i]) {
      EXPECT_EQ(r.transfers[i], a.transfers[i]);
    }
    moved += r.transfers[i].step != a.transfers[i].step;
  }
  int32_t reversed = 0;  // members that change step in a reversed chain: all but the middle one
  for (size_t c = 1; c < chains.size(); c += 2) reversed += static_cast<int32_t>(chains[c].size() / 2 * 2);
  EXPECT_EQ(moved, reversed);
  for (size_t c = 1; c < chains.size(); c += 2)  // reversed: the last runs at the first's step
    EXPECT_EQ(r.transfers[static_cast<size_t>(chains[c].back())].step, a.transfers[static_cast<size_t>(chains[c].front())].step);
  CompileOptions o;
  o.chain_keys = keys;
  const Plan p = compile(a, t, o).plan;
  EXPECT_EQ(replay_errors(p), "");
  o.op_order.resize(a.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) o.op_order[i] = -a.transfers[i].step;
  const Plan q = compile(a, t, o).plan;  // the deadlock check passed
  EXPECT_EQ(replay_errors(q), "");
  EXPECT_NE(plan_to_json(q), plan_to_json(p));
}

TEST(ChainOrder, KeysOfAnotherLengthAreRefused) {
  const Algorithm a = test::hm_allreduce(2, 4);
  for (int32_t which = 0; which < 2; ++which) {
    CompileOptions o;
    (which ? o.op_order : o.chain_keys).assign(a.transfers.size() - 1, 0.0);
    try {
      compile(a, test::a100(2, 4), o);
      ADD_FAILURE() << "taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(which ? "op_order" : "chain_keys"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace weft
