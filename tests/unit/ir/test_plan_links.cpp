// The channel a plan records per ordered pair of ranks (Plan::links): chosen from the
// topology's link class, written to and read from plan JSON, checked by validate_plan.
#include <gtest/gtest.h>

#include "ir/plan_core.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// Two ranks: rank 0 sends its input chunk to rank 1, which receives it into its output.
Plan two_rank_plan() {
  Plan p;
  p.algorithm = "t";
  p.num_ranks = 2;
  p.input_chunks = 1;
  p.output_chunks = 1;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[static_cast<size_t>(r)].rank = r;
  Slot send;
  send.primitive = Primitive::Send;
  send.send_peer = 1;
  send.src = {Buffer::Input, 0};
  Slot recv;
  recv.primitive = Primitive::Recv;
  recv.recv_peer = 0;
  recv.dst = {Buffer::Output, 0};
  p.ranks[0].tbs.push_back(ThreadBlock{{send}});
  p.ranks[1].tbs.push_back(ThreadBlock{{recv}});
  return p;
}

void expect_verify(const Plan& p, const std::string& want) {
  try {
    validate_plan(p);
    ADD_FAILURE() << "accepted; wanted: " << want;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(PlanLinks, ChosenFromTheTopologysLinkClass) {
  const Plan p = two_rank_plan();
  const std::vector<PlanLink> nv = choose_links(p, topology_preset("h200-1x2"));
  ASSERT_EQ(nv.size(), 1u);
  EXPECT_EQ(nv[0], (PlanLink{0, 1, ChannelKind::Memory}));
  Topology pcie = topology_preset("h200-1x2");
  pcie.intra_node_link = "pcie";
  EXPECT_EQ(choose_links(p, pcie)[0].channel, ChannelKind::PortCopyEngine);
  EXPECT_EQ(choose_links(p, topology_preset("a100-2x1"))[0].channel, ChannelKind::PortNetwork);
  pcie.intra_node_link = "pcie-gen9";
  EXPECT_THROW(pcie.validate(), Error);
}

TEST(PlanLinks, RoundTripAndOlderPlansWithout) {
  Plan p = two_rank_plan();
  EXPECT_EQ(plan_to_json(p).find("\"links\""), std::string::npos);  // not recorded: not written
  EXPECT_EQ(plan_from_json(plan_to_json(p), "mem"), p);
  p.links = choose_links(p, topology_preset("a100-2x1"));
  const std::string text = plan_to_json(p);
  EXPECT_NE(text.find("\"channel\": \"port-net\""), std::string::npos) << text;
  EXPECT_EQ(plan_from_json(text, "mem"), p);
  std::string bad = text;
  bad.replace(bad.find("port-net"), 8, "carrier-pigeon");
  try {
    plan_from_json(bad, "mem.json");
    ADD_FAILURE() << "unknown channel accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("links[0].channel"), std::string::npos) << e.what();
  }
}

TEST(PlanLinks, ValidatorRules) {
  Plan p = two_rank_plan();
  p.links = {{0, 1, ChannelKind::Memory}};
  EXPECT_NO_THROW(validate_plan(p));
  p.links = {{0, 1, ChannelKind::Memory}, {1, 0, ChannelKind::Memory}};
  expect_verify(p, "names a pair no slot sends over");
  p.links = {{0, 0, ChannelKind::Memory}};
  expect_verify(p, "is not a pair of distinct ranks");
  p.links = {{0, 1, ChannelKind::Memory}, {0, 1, ChannelKind::PortNetwork}};
  expect_verify(p, "out of (src, dst) order or repeated");
  // Rank 1 also sends back: the pair 1 -> 0 then needs an entry.
  Slot back;
  back.primitive = Primitive::Send;
  back.send_peer = 0;
  back.src = {Buffer::Input, 0};
  p.ranks[1].tbs.push_back(ThreadBlock{{back}});
  p.links = {{0, 1, ChannelKind::Memory}};
  expect_verify(p, "rank 1 sends to rank 0 but no entry gives that pair's channel");
  p.links = {{1, 0, ChannelKind::Memory}, {0, 1, ChannelKind::Memory}};
  expect_verify(p, "out of (src, dst) order");
}

}  // namespace
}  // namespace weft
