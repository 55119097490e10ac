// Ranks on several hosts (plan/placement.hpp): host identities and their checks, nodes
// from hosts, the channel the runtime builds for each link of a plan, and what the runtime
// records on the plans it compiles for a multi-host layout.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net/node_layout.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/host_identity.hpp"
#include "plan/placement.hpp"
#include "plan/plan_source.hpp"
#include "rank_processes.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

HostIdentity named(uint64_t key, const char* name) {
  HostIdentity h;
  h.key = key;
  std::strncpy(h.name, name, HostIdentity::kNameBytes - 1);
  return h;
}

/// Runs f, expecting weft::Error with `code` and every needle in the message.
template <typename F>
void expect_error(F f, ErrorCode code, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(HostIdentity, HostNameAndBootIdTellHostsApart) {
  const HostIdentity a = make_host_identity("node", "boot-1", "m-1", "");
  EXPECT_EQ(a.key, make_host_identity("node", "boot-1", "m-2", "").key);  // the boot id decides
  // Two containers of one name on different machines (kernels) are different hosts.
  EXPECT_NE(a.key, make_host_identity("node", "boot-2", "m-1", "").key);
  EXPECT_NE(a.key, make_host_identity("node2", "boot-1", "m-1", "").key);
  EXPECT_STREQ(a.name, "node");
  // No boot id: the machine id stands in, and never equals a boot id of the same text.
  const HostIdentity m = make_host_identity("node", "", "m-1", "");
  EXPECT_NE(m.key, make_host_identity("node", "", "m-2", "").key);
  EXPECT_NE(m.key, make_host_identity("node", "m-1", "", "").key);
  EXPECT_NE(a.key, 0u);
}

TEST(HostIdentity, NamesAreBoundedAndPrintable) {
  const std::string longname(300, 'x');
  const HostIdentity h = make_host_identity(longname, "b", "", "");
  EXPECT_EQ(std::strlen(h.name), HostIdentity::kNameBytes - 1);
  EXPECT_STREQ(make_host_identity("a\nb\x01", "b", "", "").name, "a?b?");
  EXPECT_STREQ(make_host_identity("", "b", "", "").name, "?");
}

TEST(HostIdentity, OverrideReplacesTheHost) {
  const HostIdentity a = make_host_identity("node", "boot-1", "", "a");
  EXPECT_STREQ(a.name, "a");
  EXPECT_EQ(a.key, make_host_identity("other", "boot-9", "", "a").key);
  EXPECT_NE(a.key, make_host_identity("node", "boot-1", "", "b").key);
  EXPECT_NE(a.key, make_host_identity("a", "", "", "").key);  // an override never equals a real host
  for (const std::string& bad : {std::string("a b"), std::string("a/b"), std::string(64, 'a'), std::string("\xff")})
    expect_error([&] { make_host_identity("n", "b", "", bad); }, ErrorCode::InvalidArgument, {"WEFT_HOST_ID="});
  EXPECT_NO_THROW(make_host_identity("n", "b", "", std::string(63, 'a')));
}

TEST(HostIdentity, LocalReadsWeftHostId) {
  setenv("WEFT_HOST_ID", "rack1-node.7", 1);
  EXPECT_STREQ(local_host_identity().name, "rack1-node.7");
  setenv("WEFT_HOST_ID", "no spaces", 1);
  expect_error([] { local_host_identity(); }, ErrorCode::InvalidArgument, {"WEFT_HOST_ID='no spaces'"});
  unsetenv("WEFT_HOST_ID");
  const HostIdentity h = local_host_identity();
  EXPECT_NE(h.key, 0u);
  EXPECT_EQ(h.key, local_host_identity().key);
}

TEST(HostMap, RanksOfOneKeyShareAHost) {
  const HostMap m = map_hosts(0, {named(5, "a"), named(5, "a"), named(9, "b"), named(5, "a")});
  EXPECT_EQ(m.host_of_rank, (std::vector<int>{0, 0, 1, 0}));
  EXPECT_EQ(m.host_names, (std::vector<std::string>{"a", "b"}));
  // One name, two keys (containers of one name on two machines): two hosts, never merged.
  EXPECT_EQ(map_hosts(0, {named(1, "w"), named(2, "w")}).hosts(), 2);
}

TEST(HostMap, HostileIdentitiesAreRefused) {
  expect_error([] { map_hosts(3, {named(5, "a"), named(5, "b")}); }, ErrorCode::Remote,
               {"rank 3:", "rank 0 and rank 1", "'a' and 'b'"});
  HostIdentity unterminated;
  unterminated.key = 7;
  std::memset(unterminated.name, 'z', sizeof(unterminated.name));
  expect_error([&] { map_hosts(0, {named(5, "a"), unterminated}); }, ErrorCode::Remote, {"rank 1", "64 bytes"});
  expect_error([] { map_hosts(0, {named(0, "a")}); }, ErrorCode::Remote, {"host key 0"});
  expect_error([] { map_hosts(0, {named(5, "")}); }, ErrorCode::Remote, {"rank 0", "empty"});
  expect_error([] { map_hosts(0, {named(5, "a\tb")}); }, ErrorCode::Remote, {"non-printable"});
}

TEST(HostMap, NodesComeFromHosts) {
  // Interleaved ranks (Slurm's cyclic distribution): nodes follow the hosts, not rank order.
  const HostMap m = map_hosts(0, {named(1, "a"), named(2, "b"), named(1, "a"), named(2, "b")});
  std::vector<uint64_t> hosts(m.host_of_rank.begin(), m.host_of_rank.end());
  const net::NodeLayout l = net::node_layout(hosts, 0);
  EXPECT_EQ(l.node_of_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(regular_node_size(l.node_of_rank), 0);
  EXPECT_EQ(regular_node_size({0, 0, 1, 1}), 2);
  EXPECT_EQ(regular_node_size({0, 0, 0}), 0);
  EXPECT_EQ(regular_node_size({0, 0, 1}), 0);
  // Two hosts, each split in two emulated nodes.
  EXPECT_EQ(net::node_layout({0, 0, 1, 1}, 2).node_of_rank, (std::vector<int>{0, 1, 2, 3}));
}

/// 4 ranks: {0, 1} on host a, {2, 3} on host b, one node per host (or two per host when
/// `emulated`: every rank its own node).
Placement two_hosts(bool emulated = false) {
  Placement p;
  p.hosts = map_hosts(0, {named(1, "a"), named(1, "a"), named(2, "b"), named(2, "b")});
  p.node_of_rank = emulated ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 0, 1, 1};
  return p;
}

Placement one_host_two_nodes() {
  Placement p;
  p.hosts = map_hosts(0, {named(1, "a"), named(1, "a"), named(1, "a"), named(1, "a")});
  p.node_of_rank = {0, 0, 1, 1};
  return p;
}

Plan allpairs4() { return make_plan(Collective::AllReduce, 4, "allpairs", "Simple", 1, false, 0); }

void set_link(Plan& p, int s, int d, ChannelKind k) {
  for (PlanLink& l : p.links)
    if (l.src == s && l.dst == d) l.channel = k;
}

TEST(PlanChannels, WithoutLinksTheLayoutDecides) {
  const Plan p = allpairs4();
  ASSERT_TRUE(p.links.empty());
  const Placement w = two_hosts();
  EXPECT_NO_THROW(check_plan_channels(p, w));
  EXPECT_EQ(built_channel(p, w, 0, 1), ChannelKind::Memory);
  EXPECT_EQ(built_channel(p, w, 0, 2), ChannelKind::PortNetwork);
  EXPECT_EQ(built_channel(p, w, 3, 1), ChannelKind::PortNetwork);
  EXPECT_EQ(built_channel(p, one_host_two_nodes(), 1, 2), ChannelKind::PortNetwork);
}

TEST(PlanChannels, RecordedKindsAreBuiltOrRefused) {
  Plan p = allpairs4();
  p.links = runtime_links(p, {0, 0, 1, 1});
  ASSERT_EQ(p.links.size(), 12u);
  const Placement w = two_hosts();
  EXPECT_NO_THROW(check_plan_channels(p, w));
  EXPECT_EQ(built_channel(p, w, 2, 3), ChannelKind::Memory);
  EXPECT_EQ(built_channel(p, w, 2, 0), ChannelKind::PortNetwork);

  // A memory channel between hosts: refused naming both ranks and their hosts.
  Plan mem = p;
  set_link(mem, 1, 2, ChannelKind::Memory);
  expect_error([&] { check_plan_channels(mem, w); }, ErrorCode::InvalidUsage,
               {"records memory for rank 1 (host 'a') -> rank 2 (host 'b')", "different hosts"});
  // Between emulated nodes of one host a memory channel can be built (CUDA IPC).
  EXPECT_EQ(built_channel(mem, one_host_two_nodes(), 1, 2), ChannelKind::Memory);

  // port-net within a node: no network FIFOs there.
  Plan net = p;
  set_link(net, 0, 1, ChannelKind::PortNetwork);
  expect_error([&] { check_plan_channels(net, w); }, ErrorCode::InvalidUsage,
               {"port-net for rank 0 (host 'a') -> rank 1 (host 'a')", "node 0"});
  EXPECT_NO_THROW(check_plan_channels(net, two_hosts(true)));  // every rank its own node

  // port-ce: the interpreter has no copy-engine FIFO; refused, never run as something else.
  Plan ce = p;
  set_link(ce, 3, 2, ChannelKind::PortCopyEngine);
  expect_error([&] { check_plan_channels(ce, w); }, ErrorCode::InvalidUsage,
               {"port-ce for rank 3 (host 'b') -> rank 2 (host 'b')", "copy engines"});

  // A plan for another rank count.
  expect_error([&] { check_plan_channels(make_plan(Collective::AllReduce, 2, "allpairs", "Simple", 1, false, 0), w); },
               ErrorCode::InvalidUsage, {"is for 2 ranks, the communicator has 4"});
}

TEST(PlanChannels, CompiledPlansRecordTheLayoutsLinks) {
  // Regular nodes: the compiler sees 2 nodes of 2, and the links cross where the hosts do.
  const Plan p = make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 1, false, 0, kDefaultFifoDepth, "hpds",
                           "state", {0, 0, 1, 1});
  EXPECT_EQ(p.topology, "h200-emulated-2x2");
  ASSERT_FALSE(p.links.empty());
  for (const PlanLink& l : p.links)
    EXPECT_EQ(l.channel, (l.src < 2) != (l.dst < 2) ? ChannelKind::PortNetwork : ChannelKind::Memory)
        << l.src << " -> " << l.dst;
  EXPECT_NO_THROW(check_plan_channels(p, two_hosts()));
  // Interleaved hosts: scheduled as one node, links still from the layout.
  const Plan q = make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 1, false, 0, kDefaultFifoDepth, "hpds",
                           "state", {0, 1, 0, 1});
  for (const PlanLink& l : q.links)
    EXPECT_EQ(l.channel, (l.src % 2) != (l.dst % 2) ? ChannelKind::PortNetwork : ChannelKind::Memory);
  // No layout given: the plan keeps the compiler's own choice.
  const Plan one = make_plan(Collective::AllReduce, 4, "ring_allreduce", "Simple", 1, false, 0);
  for (const PlanLink& l : one.links) EXPECT_EQ(l.channel, ChannelKind::Memory);
}

// Communicator creation's host step across processes, on loopback: each rank process takes
// its own WEFT_HOST_ID, the identities travel through the bootstrap's all-gather, and every
// rank derives the same hosts and nodes (what Communicator::init_memory does before it maps
// anything; the CUDA part is left to the GPU tests, gpu_*_hosts_4).
TEST(MultiHost, RanksOfTwoFakeHostsAgreeOnTheLayout) {
  const int n = 4;
  UniqueId id = start_bootstrap_root(net::resolve("127.0.0.1", 0), 0, 10);
  test::run_rank_processes(n, [&](int r) {
    setenv("WEFT_HOST_ID", r < 2 ? "a" : "b", 1);
    auto b = Bootstrap::join(id, r, n, 10);
    std::vector<HostIdentity> ids(n);
    ids[static_cast<size_t>(r)] = local_host_identity();
    b->allgather(ids.data(), sizeof(HostIdentity), 10);
    const HostMap m = map_hosts(r, ids);
    std::vector<uint64_t> hosts(m.host_of_rank.begin(), m.host_of_rank.end());
    const net::NodeLayout l = net::node_layout(hosts, 0);
    int bad = 0;
    bad |= m.host_names != std::vector<std::string>{"a", "b"};
    bad |= l.node_of_rank != std::vector<int>{0, 0, 1, 1};
    bad |= l.crosses_network(r, (r + 2) % n) ? 0 : 1;
    b->barrier(10);
    return bad;
  });
}

}  // namespace
}  // namespace weft
