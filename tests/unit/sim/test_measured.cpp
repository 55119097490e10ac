// Measured traces (sim/measured_trace.hpp) from synthetic records, and the small-message
// model (sim/call_model.hpp) against the figures it was calibrated to.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/call_model.hpp"
#include "sim/measured_trace.hpp"
#include "sim/simulator.hpp"
#include "sim/svg_plot.hpp"
#include "sim/trace.hpp"
#include "util/error.hpp"
#include "sim_test_util.hpp"

namespace weft::sim {
namespace {

// Two ranks, each with a sending block (slot 0, to the peer on connection 0) and a
// receiving block (slot 1, from the peer), three micro-batches, Simple, FIFO depth 4.
// Times are on one true clock (ns); rank `q`'s GPU reads true + base[q]; rank 1's blocks
// start `late` ns after rank 0's. Sender k: waits 200 ns for credit, moves 500. Receiver k:
// waits for the sender's end + 100, moves 300.
constexpr uint64_t kBase0 = 1'700'000'000'000'000'000ull;
constexpr uint64_t kBase1 = kBase0 + 5'000'000ull;  // rank 1's GPU clock runs 5 ms ahead

MeasuredRank synthetic_rank(int32_t q, uint64_t late) {
  const uint64_t base = q == 0 ? kBase0 : kBase1;
  MeasuredRank r;
  r.rank = q;
  r.nranks = 2;
  r.kernel = "interpreter";
  r.collective = "AllReduce";
  r.algorithm = "allpairs";
  r.protocol = "Simple";
  r.bytes = 1 << 20;
  r.microbatches = 3;
  r.fifo_depth = 4;
  const int32_t peer = 1 - q;
  r.slots.push_back(MeasuredSlot{0, 0, Primitive::Send, peer, 0, -1, -1});
  r.slots.push_back(MeasuredSlot{1, 0, Primitive::Recv, -1, -1, peer, 0});
  for (int b = 0; b < 2; ++b) {
    MeasuredBlock blk;
    blk.start_ns = base + (q == 1 ? late : 0);
    blk.cap = 16;
    for (uint32_t k = 0; k < 3; ++k) {
      exec::TraceRecord x{};
      const uint64_t w = 100 + 1000 * k;
      x.slot = b;
      x.mb = k;
      x.wait_ns = base + w;
      x.deps_ns = base + w;
      if (b == 0) {
        x.move_ns = base + w + 200;
        x.end_ns = x.move_ns + 500;
        x.spos = 10 + k;  // FIFO positions persist across calls
      } else {
        x.move_ns = base + w + 200 + 500 + 100;  // the peer's send ended at w + 700 (same true times)
        x.end_ns = x.move_ns + 300;
        x.rpos = 10 + k;
      }
      blk.records.push_back(x);
    }
    blk.count = 3;
    blk.end_ns = blk.records.back().end_ns + 20;
    r.blocks.push_back(blk);
  }
  return r;
}

TEST(MeasuredTrace, JsonRoundTrip) {
  const MeasuredRank a = synthetic_rank(1, 50);
  const MeasuredRank b = measured_rank_from_json(measured_rank_to_json(a), "rank1.json");
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.protocol, "Simple");
  ASSERT_EQ(b.slots.size(), 2u);
  EXPECT_EQ(b.slots[1].prim, Primitive::Recv);
  EXPECT_EQ(b.slots[1].recv_peer, 0);
  ASSERT_EQ(b.blocks.size(), 2u);
  ASSERT_EQ(b.blocks[1].records.size(), 3u);
  EXPECT_EQ(b.blocks[1].records[2].end_ns, a.blocks[1].records[2].end_ns);
  EXPECT_EQ(b.blocks[1].records[2].rpos, 12u);
  EXPECT_EQ(b.blocks[0].start_ns, kBase1 + 50);
}

TEST(MeasuredTrace, BadJsonNamesTheFile) {
  try {
    measured_rank_from_json("{\"format\":\"weft-measured-trace\"}", "r0.json");
    FAIL() << "accepted a trace without fields";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse);
    EXPECT_NE(std::string(e.what()).find("r0.json"), std::string::npos) << e.what();
  }
  MeasuredRank r = synthetic_rank(0, 0);
  r.blocks[0].records[0].slot = 7;
  EXPECT_THROW(measured_rank_from_json(measured_rank_to_json(r), "x"), Error);
}

TEST(MeasuredTrace, ClocksAlignFromMessages) {
  // Rank 1 starts 50 ns late on the true clock: the messages bound the offset between the
  // ranks' first-block clocks to [-50, 150] ns (Simple: receive starts after send ends),
  // whose midpoint is the truth.
  const ClockAlignment c = align_clocks({synthetic_rank(0, 50), synthetic_rank(1, 50)});
  ASSERT_EQ(c.offset_ns.size(), 2u);
  EXPECT_EQ(c.offset_ns[0], 0.0);
  EXPECT_NEAR(c.offset_ns[1], -5'000'000.0, 1.0);
  EXPECT_EQ(c.how[1], "messages");
  EXPECT_NEAR(c.uncertainty_ns[1], 100.0, 1e-6);
  EXPECT_EQ(c.messages, 6);
  EXPECT_TRUE(c.consistent);
}

TEST(MeasuredTrace, BusyIdleAndSpans) {
  const MeasuredRun run = measured_run({synthetic_rank(0, 50), synthetic_rank(1, 50)});
  const SimReport& r = run.report;
  EXPECT_EQ(r.topology, "measured");
  EXPECT_EQ(r.collective, Collective::AllReduce);
  ASSERT_EQ(r.tbs.size(), 4u);
  EXPECT_EQ(run.blocks, 4);
  EXPECT_EQ(run.dropped, 0u);
  // Rank 0's sender: lifetime 0 .. 2820 ns (its end reading), waits 3 x 200.
  EXPECT_NEAR(r.tbs[0].lifetime_us, 2.820, 1e-9);
  EXPECT_NEAR(r.tbs[0].idle(), 600.0 / 2820, 1e-9);
  // Rank 0's receiver: waits 3 x 800 over 3220 ns.
  EXPECT_NEAR(r.tbs[1].idle(), 2400.0 / 3220, 1e-9);
  // Rank 1's blocks start 50 ns later.
  EXPECT_NEAR(r.tbs[2].lifetime_us, 2.770, 1e-6);
  EXPECT_NEAR(r.tbs[3].idle(), 2400.0 / 3170, 1e-6);
  const double mean = (600.0 / 2820 + 2400.0 / 3220 + 600.0 / 2770 + 2400.0 / 3170) / 4;
  EXPECT_NEAR(r.tb_idle_mean, mean, 1e-6);
  EXPECT_NEAR(r.tb_idle_max, 2400.0 / 3170, 1e-6);  // rank 1's receiver: the shortest life
  EXPECT_NEAR(r.tb_sync_idle_mean, 0.0, 1e-9);  // no dependency waits
  EXPECT_NEAR(r.time_us, 3.220, 1e-6);
  EXPECT_EQ(r.tbs_per_rank_max, 2);
  EXPECT_EQ(r.invocations, 12);
  // A wait and a busy span per record.
  EXPECT_EQ(r.trace.size(), 24u);
  // Rank 1's spans sit on rank 0's clock: its first receive moves at its true 900 ns.
  bool found = false;
  for (size_t i = 0; i < r.trace.size(); ++i)
    if (!r.trace[i].wait && r.trace[i].slot == 3 && r.trace[i].microbatch == 0) {
      EXPECT_NEAR(r.trace[i].start_us, 0.900, 1e-6);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(MeasuredTrace, ChromeTraceIsValidJson) {
  const MeasuredRun run = measured_run({synthetic_rank(0, 0), synthetic_rank(1, 0)});
  std::ostringstream out;
  write_chrome_trace(out, run.report, run.labels);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  int meta = 0, busy = 0, wait = 0;
  std::set<std::pair<int, int>> tracks;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") {
      ++meta;
      continue;
    }
    tracks.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
    if (e.at("cat") == "idle") ++wait;
    else ++busy;
  }
  EXPECT_EQ(meta, 2 + 4);
  EXPECT_EQ(busy, 12);
  EXPECT_EQ(wait, 12);
  EXPECT_EQ(tracks.size(), 4u);
  const auto& other = j.at("otherData");
  EXPECT_TRUE(other.at("measured").get<bool>());
  EXPECT_EQ(other.at("dropped_records").get<int>(), 0);
  EXPECT_EQ(other.at("clocks").size(), 2u);
  EXPECT_EQ(other.at("clocks")[1].at("how"), "messages");
  EXPECT_EQ(other.at("tbs").size(), 4u);
  // Names as the simulator's: "send 0->1", "recv 1<-0".
  EXPECT_NE(out.str().find("\"send 0->1\""), std::string::npos);
  EXPECT_NE(out.str().find("\"recv 1<-0\""), std::string::npos);
}

TEST(MeasuredTrace, DroppedRecordsAreCountedAndCutTheLifetime) {
  MeasuredRank r1 = synthetic_rank(1, 0);
  // Rank 1's receiver held two records of three: its lifetime ends at the second's end.
  r1.blocks[1].cap = 2;
  r1.blocks[1].records.pop_back();
  const MeasuredRun run = measured_run({synthetic_rank(0, 0), r1});
  EXPECT_EQ(run.dropped, 1u);
  EXPECT_NEAR(run.report.tbs[3].lifetime_us, 2.200, 1e-6);
  EXPECT_NEAR(run.report.tbs[3].idle(), 1600.0 / 2200, 1e-6);
  EXPECT_EQ(run.report.trace.size(), 22u);
  std::ostringstream out;
  write_chrome_trace(out, run.report, run.labels);
  EXPECT_EQ(nlohmann::json::parse(out.str()).at("otherData").at("dropped_records").get<int>(), 1);
}

TEST(MeasuredTrace, BlocksFromTheDeviceBuffer) {
  // Three regions of 2 records: block 0 made 1, block 1 made 5 (3 dropped), block 2 has no
  // slot and was never written.
  const uint32_t cap = 2;
  std::vector<char> buf(3 * exec::trace_region_bytes(cap), 0);
  auto* h0 = exec::trace_block(buf.data(), cap, 0);
  h0->start_ns = 100;
  h0->end_ns = 900;
  h0->count = 1;
  h0->cap = cap;
  reinterpret_cast<exec::TraceRecord*>(h0 + 1)[0] = exec::TraceRecord{110, 120, 130, 140, 3, 0, 7, 0};
  auto* h1 = exec::trace_block(buf.data(), cap, 1);
  h1->start_ns = 105;
  h1->count = 5;
  h1->cap = cap;
  auto* r1 = reinterpret_cast<exec::TraceRecord*>(h1 + 1);
  r1[0] = exec::TraceRecord{200, 200, 210, 220, 4, 0, 0, 1};
  r1[1] = exec::TraceRecord{230, 230, 240, 250, 4, 1, 0, 2};
  const std::vector<MeasuredBlock> blocks = blocks_from_trace_buffer(buf.data(), buf.size(), cap);
  ASSERT_EQ(blocks.size(), 3u);
  ASSERT_EQ(blocks[0].records.size(), 1u);
  EXPECT_EQ(blocks[0].records[0].end_ns, 140u);
  EXPECT_EQ(blocks[0].records[0].rpos, 7u);
  EXPECT_EQ(blocks[0].dropped(), 0u);
  EXPECT_EQ(blocks[1].records.size(), 2u);
  EXPECT_EQ(blocks[1].dropped(), 3u);
  EXPECT_EQ(blocks[1].records[1].spos, 2u);
  EXPECT_EQ(blocks[1].end_ns, 0u);  // stopped early or its end not written
  EXPECT_TRUE(blocks[2].records.empty());
  EXPECT_THROW(blocks_from_trace_buffer(buf.data(), buf.size() - 1, cap), Error);
  h1->cap = 3;
  EXPECT_THROW(blocks_from_trace_buffer(buf.data(), buf.size(), cap), Error);
}

TEST(MeasuredTrace, RefusesMissingOrUntracedRanks) {
  MeasuredRank one = synthetic_rank(1, 0);
  one.kernel = "oneshot";
  one.note = "the one-shot kernel records nothing";
  try {
    measured_run({synthetic_rank(0, 0), one});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("oneshot"), std::string::npos) << e.what();
  }
  EXPECT_THROW(measured_run({synthetic_rank(0, 0)}), Error);  // nranks 2, one gathered
  EXPECT_THROW(measured_run({synthetic_rank(1, 0), synthetic_rank(0, 0)}), Error);
}

TEST(MeasuredTrace, PlotOfMeasuredAndSimulated) {
  const std::string svg = busbw_plot_svg({{"measured", {{1 << 20, 100.0}}}, {"simulated", {{1 << 20, 110.0}}}}, "t");
  EXPECT_NE(svg.find(">measured<"), std::string::npos);
  EXPECT_NE(svg.find(">simulated<"), std::string::npos);
}

// The small-message model against the measurements it was calibrated to (2 ranks, NV18,
// float32 sum; docs/cost-model.md, "Small messages"): within 30%.
void expect_within(double predicted, double measured, const char* what) {
  EXPECT_LE(std::abs(predicted - measured) / measured, 0.30) << what << ": predicted " << predicted << " us, measured "
                                                              << measured;
}

TEST(CallModel, OneShotRowsWithin30Percent) {
  expect_within(oneshot_time_us(Collective::AllReduce, 8, 2, false), 5.2, "AllReduce 8 B");
  expect_within(oneshot_time_us(Collective::AllReduce, 64 << 10, 2, false), 5.3, "AllReduce 64 KiB");
  expect_within(oneshot_time_us(Collective::AllReduce, 512 << 10, 2, false), 8.7, "AllReduce 512 KiB");
  expect_within(oneshot_time_us(Collective::AllGather, 1 << 20, 2, false), 7.7, "AllGather 1 MiB");
  expect_within(oneshot_time_us(Collective::ReduceScatter, 1 << 20, 2, false), 9.8, "ReduceScatter 1 MiB");
  for (uint64_t b : {8ull, 64ull, 1024ull, 4096ull}) {
    expect_within(oneshot_time_us(Collective::AllReduce, b, 2, true), 3.05, "AllReduce graph, low");
    expect_within(oneshot_time_us(Collective::AllReduce, b, 2, true), 3.61, "AllReduce graph, high");
  }
  // The floor is the launch: never predicted below it.
  EXPECT_GT(oneshot_time_us(Collective::AllReduce, 8, 2, false), kCallCosts.launch_us);
  EXPECT_GT(oneshot_time_us(Collective::AllReduce, 8, 2, true), kCallCosts.graph_launch_us);
}

TEST(CallModel, OneShotLimits) {
  EXPECT_TRUE(oneshot_carries(Collective::AllReduce, 1 << 20, 2));
  EXPECT_FALSE(oneshot_carries(Collective::AllReduce, (1 << 20) + 8, 2));
  EXPECT_TRUE(oneshot_carries(Collective::AllGather, 2 << 20, 2));  // 1 MiB per peer
  EXPECT_FALSE(oneshot_carries(Collective::AllGather, (2 << 20) + 16, 2));
  // Broadcast and Reduce where WEFT_ALGO names the kernel for them: the whole payload per peer.
  EXPECT_TRUE(oneshot_carries(Collective::Broadcast, 1 << 20, 2));
  EXPECT_FALSE(oneshot_carries(Collective::Reduce, (1 << 20) + 8, 4));
  // AllToAll where WEFT_ALGO or a row names it: the payload's block per peer.
  EXPECT_TRUE(oneshot_carries(Collective::AllToAll, 8, 2));
  EXPECT_TRUE(oneshot_carries(Collective::AllToAll, 4 << 20, 4));
  EXPECT_FALSE(oneshot_carries(Collective::AllToAll, (4 << 20) + 32, 4));
  EXPECT_FALSE(oneshot_carries(Collective::AllReduce, 8, 9));
  EXPECT_FALSE(oneshot_carries(Collective::AllReduce, 8, 1));
  // More peers, more packets: time grows with the rank count.
  EXPECT_GT(oneshot_time_us(Collective::AllReduce, 64 << 10, 8, false), oneshot_time_us(Collective::AllReduce, 64 << 10, 2, false));
}

// One transfer of 1 MiB between the two GPUs of the test topology, simulated with `o`.
double one_transfer_us(SimOptions o) {
  testing::PlanBuilder b(2);
  b.transfer(0, 0, 1, 0);
  o.bytes = 1 << 20;
  return simulate(b.plan(), testing::test_topology(1, 2), o).time_us;
}

TEST(CallModel, LLPlansScaleAlphaLatencyAndRateApart) {
  // alpha + bytes / rate + latency + alpha (Simple); LL: the alphas x ll_alpha_scale, the
  // hop's latency x ll_latency_scale (two figures: an LL step costs 4.25 us, its hop 1 us),
  // the block's rate x ll_rate_scale; LL128 the same with its own figures.
  SimOptions o;
  const double simple = one_transfer_us(o);
  const double mib_us = (1 << 20) / 20e3;  // 1 MiB at 20 GB/s
  EXPECT_NEAR(simple, 1 + mib_us + 2 + 1, 0.01 * simple);
  const CallCosts& k = kCallCosts;
  set_runtime_protocol(o, algo::Protocol::LL, k);
  const double ll = one_transfer_us(o);
  EXPECT_NEAR(ll, 2 * k.ll_alpha_scale + 2 * k.ll_latency_scale + mib_us / k.ll_rate_scale, 0.01 * ll);
  set_runtime_protocol(o, algo::Protocol::LL128, k);
  const double ll128 = one_transfer_us(o);
  EXPECT_NEAR(ll128, 2 * k.ll128_alpha_scale + 2 * k.ll128_latency_scale + mib_us / k.ll128_rate_scale, 0.01 * ll128);
  // Each figure moves its own term only.
  CallCosts twice = k;
  twice.ll_alpha_scale *= 2;
  set_runtime_protocol(o, algo::Protocol::LL, twice);
  EXPECT_NEAR(one_transfer_us(o) - ll, 2 * k.ll_alpha_scale, 0.01 * ll);
  twice = k;
  twice.ll_latency_scale *= 2;
  set_runtime_protocol(o, algo::Protocol::LL, twice);
  EXPECT_NEAR(one_transfer_us(o) - ll, 2 * k.ll_latency_scale, 0.01 * ll);
}

TEST(CallModel, RuntimeRatesOversubscribeWhatThePlanRatesDoNot) {
  // Twelve blocks of 20 GB/s ask a 300 GB/s NVLink pair for 240: never saturated at the
  // plan's rates, so the engine need not track it. At the runtime's rates (x2: 480) it is,
  // and 1 MiB takes the link's time, not the blocks' (an engine that still skipped the
  // link would finish in 1 + 2.2 + 2 + 1 us).
  testing::PlanBuilder b(2);
  constexpr int kBlocks = 12;
  for (int i = 0; i < kBlocks; ++i) {
    b.add(0, i, Primitive::Send, 1, -1, i, {}, i, kBlocks);
    b.add(1, i, Primitive::Recv, -1, 0, i, {}, i, kBlocks);
  }
  SimOptions o;
  o.bytes = 1 << 20;
  o.nvlink_gamma = 0;  // an oversubscribed link still delivers its capacity
  o.rate_scale = 2;
  const double link_us = (1 << 20) / 300e3;
  const double t = simulate(b.plan(), testing::test_topology(1, 2), o).time_us;
  EXPECT_NEAR(t, 1 + link_us + 2 + 1, 0.01 * t);
}

TEST(CallModel, LocalRateScaleSpeedsTheReceiversCopy) {
  // A Simple receive copies the landed message at tb_local_GBps x local_rate_scale (2 bytes
  // of HBM traffic a byte): 1 MiB at 80 GB/s of traffic, then at 2 x 80.
  SimOptions o;
  o.whole_messages = true;
  const double mib_us = (1 << 20) / 20e3, copy_us = 2.0 * (1 << 20) / 80e3;
  EXPECT_NEAR(one_transfer_us(o), 1 + mib_us + 2 + copy_us + 1, 0.01 * (mib_us + copy_us));
  o.local_rate_scale = 2;
  EXPECT_NEAR(one_transfer_us(o), 1 + mib_us + 2 + copy_us / 2 + 1, 0.01 * (mib_us + copy_us));
  o.local_rate_scale = 0;
  EXPECT_THROW(one_transfer_us(o), Error);
}

TEST(CallModel, WholeMessagesAndExtraAlpha) {
  // The runtime's Simple protocol: the receiver copies out of staging only once the whole
  // message has landed (1 MiB copied at 80 GB/s of HBM traffic, 2 bytes a byte), and every
  // invocation pays the extra alpha.
  SimOptions o;
  o.whole_messages = true;
  o.extra_alpha_us = 0.5;
  const double mib_us = (1 << 20) / 20e3, copy_us = 2.0 * (1 << 20) / 80e3;
  const double expect = 1.5 + mib_us + 2 + copy_us + 1.5;
  EXPECT_NEAR(one_transfer_us(o), expect, 0.01 * expect);
  o.extra_alpha_us = -1;
  EXPECT_THROW(one_transfer_us(o), Error);
}

}  // namespace
}  // namespace weft::sim
