// The lanes the UCX transport runs (net/lane_choice.hpp): given counts must agree, chosen
// ones follow the CPUs every rank may use and how many ranks share its machine, and every
// rank gets the same answer from the same offers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/lane_choice.hpp"
#include "net/tcp_rendezvous.hpp"
#include "scoped_env.hpp"
#include "util/error.hpp"

using weft::Error;
using weft::ErrorCode;
using weft::net::agree_lanes;
using weft::net::auto_lanes;
using weft::net::LaneOffer;

namespace {
LaneOffer chosen(uint64_t machine, uint32_t cpus) { return LaneOffer{true, 0, machine, cpus}; }
LaneOffer given(uint32_t lanes) { return LaneOffer{false, lanes, 7, 16}; }
}  // namespace

TEST(LaneChoice, CpusPerRankLessTwoCappedAtEight) {
  EXPECT_EQ(auto_lanes(2, 2), 0);    // this project's 2-core machine, 2 ranks: no lanes
  EXPECT_EQ(auto_lanes(2, 1), 0);
  EXPECT_EQ(auto_lanes(3, 1), 0);    // 1 lane would be left: none
  EXPECT_EQ(auto_lanes(4, 1), 2);
  EXPECT_EQ(auto_lanes(16, 2), 6);   // the GPU machine, 2 ranks
  EXPECT_EQ(auto_lanes(16, 4), 2);   // 4 ranks
  EXPECT_EQ(auto_lanes(16, 8), 0);
  EXPECT_EQ(auto_lanes(128, 1), 8);  // capped
  EXPECT_EQ(auto_lanes(0, 1), 0);
  EXPECT_EQ(auto_lanes(16, 0), 8);   // a nonsensical count of ranks counts as 1
}

TEST(LaneChoice, ChosenIsTheSmallestOverRanksCountingRanksPerMachine) {
  // 2 machines: A with 3 ranks and 32 CPUs each (32/3-2 = 8), B with 1 rank and 6 CPUs (4).
  const std::vector<LaneOffer> o = {chosen(1, 32), chosen(1, 32), chosen(2, 6), chosen(1, 32)};
  for (int me = 0; me < 4; ++me) EXPECT_EQ(agree_lanes(o, me), 4) << "rank " << me;
  // The same CPUs with every rank on one machine: 32/4-2 = 6, 6/4-2 < 2 -> 0.
  const std::vector<LaneOffer> one = {chosen(1, 32), chosen(1, 32), chosen(1, 6), chosen(1, 32)};
  EXPECT_EQ(agree_lanes(one, 0), 0);
  const std::vector<LaneOffer> gpu_machine = {chosen(9, 16), chosen(9, 16)};
  EXPECT_EQ(agree_lanes(gpu_machine, 1), 6);
}

TEST(LaneChoice, GivenCountsMustAgree) {
  EXPECT_EQ(agree_lanes({given(3), given(3)}, 0), 3);
  EXPECT_EQ(agree_lanes({given(0), given(0)}, 1), 0);
  for (const auto& o : {std::vector<LaneOffer>{given(2), given(4)}, std::vector<LaneOffer>{given(2), chosen(1, 16)},
                        std::vector<LaneOffer>{chosen(1, 16), given(0)}}) {
    for (int me = 0; me < 2; ++me) {
      try {
        agree_lanes(o, me);
        ADD_FAILURE() << "accepted mismatched lane offers on rank " << me;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
        EXPECT_NE(std::string(e.what()).find("WEFT_NET_LANES"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(me)), std::string::npos) << e.what();
      }
    }
  }
}

TEST(LaneChoice, NoOffersNoLanes) { EXPECT_EQ(agree_lanes({}, 0), 0); }

// Whether the active-message mode asks UCX for rendezvous to a peer (net/tcp_rendezvous.hpp):
// not where UCX's lanes to it carry active messages over TCP, unless WEFT_NET_TCP_RNDV=1.
// The lane lines below are ucp_ep_print_info's format (UCX 1.13 to 1.16) as describe_peer
// squeezes them.
TEST(TcpRendezvous, DataOverTcpReadFromUcxsLanes) {
  using weft::net::data_over_tcp;
  EXPECT_TRUE(data_over_tcp("lane[0]: 1:tcp/lo.0 md[0] -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup"));
  EXPECT_TRUE(data_over_tcp("lane[0]: 2:tcp/eth0.0 md[1] -> md[1]/tcp/sysdev[0] am keepalive wireup"));
  // The am usage last, before describe_peer's separator; two TCP interfaces as bandwidth lanes.
  EXPECT_TRUE(data_over_tcp("lane[0]: 3:posix/memory.0 md[2] -> md[2]/posix/sysdev[255] keepalive; "
                            "lane[1]: 1:tcp/eth0.0 md[0] -> md[0]/tcp/sysdev[0] am"));
  EXPECT_TRUE(data_over_tcp("lane[0]: 5:rc_mlx5/mlx5_0:1.0 md[3] -> md[3]/ib/sysdev[1] am keepalive; "
                            "lane[1]: 1:tcp/eth1.0 md[0] -> md[0]/tcp/sysdev[0] am_bw#1"));
  // No active messages over TCP: InfiniBand, shared memory, TCP only for keepalive or as a
  // connection manager, nothing at all (UCX cannot say).
  EXPECT_FALSE(data_over_tcp("lane[0]: 5:rc_mlx5/mlx5_0:1.0 md[3] -> md[3]/ib/sysdev[1] am am_bw#0 rma_bw#0 keepalive wireup"));
  EXPECT_FALSE(data_over_tcp("lane[0]: 3:posix/memory.0 md[2] -> md[2]/posix/sysdev[255] am am_bw#0; "
                             "lane[1]: 4:cma/memory.0 md[4] -> md[4]/cma/sysdev[255] rma_bw#0"));
  EXPECT_FALSE(data_over_tcp("lane[0]: 5:rc_mlx5/mlx5_0:1.0 md[3] -> md[3]/ib/sysdev[1] am am_bw#0; "
                             "lane[1]: 1:tcp/eth0.0 md[0] -> md[0]/tcp/sysdev[0] keepalive"));
  EXPECT_FALSE(data_over_tcp("lane[0]: cm tcp; lane[1]: 5:rc_mlx5/mlx5_0:1.0 md[3] -> md[3]/ib/sysdev[1] am"));
  EXPECT_FALSE(data_over_tcp(""));
  EXPECT_FALSE(data_over_tcp("lane[0]: tcp am"));  // no "N:transport/device": not a lane UCX printed
  EXPECT_FALSE(data_over_tcp("lane[0]: 1:tcpx/lo.0 md[0] -> am_bwx"));
}

TEST(TcpRendezvous, OverTcpOnlyWithWeftNetTcpRndv) {
  using weft::net::rendezvous_allowed;
  {
    weft::test::EnvVar unset("WEFT_NET_TCP_RNDV", nullptr);
    EXPECT_TRUE(rendezvous_allowed(false));
    EXPECT_FALSE(rendezvous_allowed(true));  // the default: eagerly over TCP
  }
  weft::test::EnvVar on("WEFT_NET_TCP_RNDV", "1");
  EXPECT_TRUE(rendezvous_allowed(true));
  EXPECT_TRUE(rendezvous_allowed(false));
}
