// Reports, traces and plots: the formats others read.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "sim/svg_plot.hpp"
#include "sim/trace.hpp"
#include "sim_test_util.hpp"

namespace weft::sim {
namespace {

using testing::PlanBuilder;
using testing::test_topology;

TEST(Report, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::ReduceScatter, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllToAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::Reduce, 8), 1.0);
}

SimReport small_run(Simulator& sim, bool trace) {
  SimOptions o;
  o.bytes = 4 << 20;
  o.trace = trace;
  return sim.run(o);
}

Plan two_rank_allgather() {
  PlanBuilder b(2, 1);
  b.plan().collective = Collective::AllGather;
  b.plan().input_chunks = 1;
  b.plan().output_chunks = 2;
  b.transfer(0, 0, 1, 0);
  b.transfer(1, 1, 0, 1);
  return b.plan();
}

TEST(Report, JsonHasTheDocumentedKeys) {
  Simulator sim(two_rank_allgather(), test_topology(1, 2));
  SimReport r = small_run(sim, false);
  nlohmann::json j = nlohmann::json::parse(report_to_json(r));
  for (const char* k : {"bytes", "time_us", "algbw_GBps", "busbw_GBps", "link_utilization", "tb_idle_mean", "tb_idle_max",
                        "tb_sync_idle_mean", "tb_sync_idle_max", "tbs_per_rank_max"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["bytes"], 4u << 20);
  EXPECT_EQ(j["tbs_per_rank_max"], 2);
  // AllGather over 2 ranks: busbw = algbw / 2.
  EXPECT_NEAR(j["busbw_GBps"].get<double>(), j["algbw_GBps"].get<double>() / 2, 1e-9);
  // Output is 4 MiB over 2 chunk slots: 2 MiB each, 2 micro-batches of 1 MiB.
  EXPECT_EQ(r.chunk_bytes, 2u << 20);
  EXPECT_EQ(r.microbatches, 2);
}

TEST(Report, LinkUtilizationCountsBusyTimeOfUsedLinks) {
  Simulator sim(two_rank_allgather(), test_topology(1, 2));
  SimReport r = small_run(sim, false);
  // Two NVLink pair links (0->1, 1->0), both busy from alpha to their last byte.
  EXPECT_EQ(r.links_used, 2);
  EXPECT_GT(r.link_utilization, 0.8);
  EXPECT_LE(r.link_utilization, 1.0);
  // Receivers wait for the first byte: some idle, all below 100%.
  EXPECT_GT(r.tb_idle_max, 0.0);
  EXPECT_LT(r.tb_idle_max, 1.0);
}

TEST(Trace, IsChromeTraceJsonWithATrackPerRankAndBlock) {
  Simulator sim(two_rank_allgather(), test_topology(1, 2));
  SimReport r = small_run(sim, true);
  std::ostringstream out;
  write_chrome_trace(out, sim, r);
  nlohmann::json j = nlohmann::json::parse(out.str());
  int procs = 0, threads = 0, busy = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++procs;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
    if (e["ph"] == "X" && e["cat"] == "busy") {
      ++busy;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(procs, 2);
  EXPECT_EQ(threads, 4);
  EXPECT_EQ(busy, 8);  // 4 slots x 2 micro-batches
  EXPECT_EQ(j["otherData"]["bytes"], 4u << 20);
  EXPECT_NE(out.str().find("\"send 0->1\""), std::string::npos);
  EXPECT_NE(out.str().find("\"recv 1<-0\""), std::string::npos);
}

TEST(Plot, OneLinePerSeriesWithEscapedNames) {
  std::vector<PlotSeries> s = {{"hpds", {{1 << 20, 10}, {1 << 21, 20}, {1 << 22, 30}}},
                               {"rr <base>", {{1 << 20, 5}, {1 << 22, 15}}}};
  std::string svg = busbw_plot_svg(s, "AllReduce & co");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("rr &lt;base&gt;"), std::string::npos);
  EXPECT_NE(svg.find("AllReduce &amp; co"), std::string::npos);
  EXPECT_NE(svg.find(">1M<"), std::string::npos);
  EXPECT_NE(svg.find(">4M<"), std::string::npos);
  // An empty plot is still a valid picture.
  EXPECT_NE(busbw_plot_svg({}, "empty").find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace weft::sim
