// The simulator's runtime model (sim/call_model.hpp) against the measured times it was fitted
// to and the ones held out: tests/data/calibration/tune-h200x4.csv, every candidate weft tune
// timed on 4 x H200 at 256 KiB to 128 MiB, and bench-h200x2.csv, AllReduce plans weft bench
// timed on 2 x H200 (docs/cost-model.md, "Calibration against weft tune"). The figures of
// the fit, not issue 32's 15% on every candidate (not reached; the doc says where): a
// change that breaks the calibration drops these counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "sim/call_model.hpp"
#include "tune/tune.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

struct Row {
  std::string collective, candidate;
  uint64_t bytes = 0;
  double us = 0;
};

// ranks,collective,bytes,"candidate",measured_us (scripts/tune_log_csv.py writes it).
std::vector<Row> load_fixture(const std::string& path, int ranks) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<Row> rows;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    const size_t q1 = line.find('"'), q2 = line.rfind('"');
    if (q1 == std::string::npos || q2 <= q1) throw std::runtime_error("bad fixture line: " + line);
    const std::string head = line.substr(0, q1);  // ranks,collective,bytes,
    const size_t c1 = head.find(','), c2 = head.find(',', c1 + 1);
    if (std::stoi(head.substr(0, c1)) != ranks) continue;
    rows.push_back({head.substr(c1 + 1, c2 - c1 - 1), line.substr(q1 + 1, q2 - q1 - 1),
                    std::stoull(head.substr(c2 + 1)), std::stod(line.substr(q2 + 2))});
  }
  return rows;
}

struct Fit {
  int matched = 0, within = 0;
  double max_abs_error = 0;
  std::vector<double> abs_errors;
};

// Simulates every fixture row that `keep` accepts as `weft tune --simulate --ranks R
// --instances (the rows') --protocols Simple,LL,LL128 -a ALGOS` does and compares.
template <typename Keep>
Fit fit_ranks(const std::vector<Row>& rows, int ranks, Keep keep) {
  std::map<std::string, std::map<std::pair<std::string, uint64_t>, double>> measured;  // collective -> (label, bytes)
  std::map<std::string, std::set<uint64_t>> sizes;
  std::set<std::string> algos;
  std::set<int> instances;
  for (const Row& r : rows) {
    if (!keep(r)) continue;
    measured[r.collective][{r.candidate, r.bytes}] = r.us;
    sizes[r.collective].insert(r.bytes);
    algos.insert(r.candidate.substr(0, r.candidate.find(' ')));
    instances.insert(std::stoi(r.candidate.substr(r.candidate.rfind(", x") + 3)));
  }
  const Topology topo = tune::simulation_topology("h200-1x8", ranks);
  tune::SweepOptions sweep;
  sweep.algorithms.assign(algos.begin(), algos.end());
  sweep.instances.assign(instances.begin(), instances.end());
  sweep.protocols = {"Simple", "LL", "LL128"};
  Fit fit;
  for (const auto& [name, m] : measured) {
    const std::optional<Collective> parsed = collective_from_string(name);
    if (!parsed) throw std::runtime_error("unknown collective " + name);
    const Collective c = *parsed;
    const std::vector<uint64_t> sz(sizes[name].begin(), sizes[name].end());
    const auto cands = tune::candidates(c, ranks, sweep);
    tune::Progress quiet(nullptr, c, cands.size(), sz.size());
    const tune::Times t = tune::simulate_times(c, ranks, cands, sz, topo, quiet);
    for (size_t i = 0; i < cands.size(); ++i)
      for (size_t s = 0; s < sz.size(); ++s) {
        auto it = m.find({cands[i].label(), sz[s]});
        if (it == m.end() || t[i][s] <= 0) continue;
        const double e = std::abs(t[i][s] / it->second - 1);
        ++fit.matched;
        fit.max_abs_error = std::max(fit.max_abs_error, e);
        fit.within += e <= 0.15;
        fit.abs_errors.push_back(e);
      }
  }
  return fit;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

const std::string kDir = std::string(WEFT_TEST_DATA_DIR) + "/tests/data/calibration/";

// The fit's held-out rows (scripts/fit_calibration.py, held_out): the 4-GPU rows at 2 MiB
// and every 2-GPU row.
bool held_out(const Row& r) { return r.bytes == (2u << 20); }

TEST(Calibration, FittedModelOnFourH200) {
  const std::vector<Row> rows = load_fixture(kDir + "tune-h200x4.csv", 4);
  ASSERT_GT(rows.size(), 1000u);
  int training = 0;
  for (const Row& r : rows) training += !held_out(r);
  const Fit f = fit_ranks(rows, 4, [](const Row& r) { return !held_out(r); });
  // Every measured candidate is simulated (a renamed candidate shows here).
  EXPECT_EQ(f.matched, training);
  // scripts/fit_calibration.py: 582 of 803 within 15%, median |error| 9.4% (the model before
  // LL's and LL128's alphas apart from their hops and the Simple blocks' local rate: 489 and
  // 11.8%; before back-to-back calls, polled receives and LL128: 363 and 17.9%).
  EXPECT_GE(f.within, 575) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.10);
}

TEST(Calibration, HeldOutRowsOfFourH200) {
  // The 2 MiB rows, which the fit never saw: 254 of 354 within 15%, median |error| 8.1% (234
  // and 9.5% before).
  const std::vector<Row> rows = load_fixture(kDir + "tune-h200x4.csv", 4);
  const Fit f = fit_ranks(rows, 4, held_out);
  EXPECT_EQ(f.matched, 354);
  EXPECT_GE(f.within, 248) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.09);
}

TEST(Calibration, HeldOutRowsOfTwoH200) {
  // AllReduce on 2 ranks from weft bench (allpairs x8-x24, ring_allreduce and hm_allreduce
  // x8/x24, 256 KiB to 1 GiB), none seen by the fit: 14 of 17 within 15% (12 before);
  // hm_allreduce at 128 MiB and 1 GiB measured twice the ring's time and is predicted at the
  // ring's (-52%, -53%): on 2 ranks the two compile to the same plan (docs/simulator.md).
  const Fit f = fit_ranks(load_fixture(kDir + "bench-h200x2.csv", 2), 2, [](const Row&) { return true; });
  EXPECT_EQ(f.matched, 17);
  EXPECT_GE(f.within, 14) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.07);
}

// One fixture row: its measured time and the simulated one.
double simulated_row(const std::string& file, int ranks, const std::string& collective, uint64_t bytes,
                     const std::string& candidate, double* measured) {
  std::vector<Row> rows = load_fixture(kDir + file, ranks);
  std::erase_if(rows, [&](const Row& r) { return r.collective != collective || r.bytes != bytes || r.candidate != candidate; });
  if (rows.size() != 1) throw std::runtime_error("no fixture row " + collective + " " + candidate);
  *measured = rows[0].us;
  const Fit f = fit_ranks(rows, ranks, [](const Row&) { return true; });
  if (f.matched != 1) throw std::runtime_error("not simulated: " + candidate);
  return f.abs_errors[0];
}

TEST(Calibration, EachNewTermBringsRowsTheModelMissedWithin15Percent) {
  // Rows the model before these terms missed by more than 15% (docs/simulator.md has the
  // before and after per collective, protocol and size), now within it.
  struct Case {
    const char* file;
    int ranks;
    const char* collective;
    uint64_t bytes;
    const char* candidate;
    const char* term;  // and the error before it
  };
  const Case cases[] = {
      // An LL step's alpha apart from its hop's latency: small calls cost their steps, not
      // their bytes (the block rate and alpha traded on one ridge before).
      {"tune-h200x4.csv", 4, "AllToAll", 256 << 10, "allpairs (hand-built, LL, x24)", "ll_alpha_scale (-26%)"},
      {"tune-h200x4.csv", 4, "Reduce", 256 << 10, "allpairs (hand-built, LL, x24)", "ll_alpha_scale (-28%)"},
      // The same for LL128.
      {"tune-h200x4.csv", 4, "Reduce", 256 << 10, "allpairs (hand-built, LL128, x24)", "ll128_alpha_scale (-30%)"},
      {"tune-h200x4.csv", 4, "Broadcast", 256 << 10, "chain (hand-built, LL128, x24)", "ll128_alpha_scale (-20%)"},
      // A Simple block reducing a landed message at 100 GB/s of HBM traffic, not 80: the
      // Reduce's root no longer lags its peers (fitted on 4 GPUs; the 2-GPU row is held out).
      {"tune-h200x4.csv", 4, "Reduce", 16 << 20, "allpairs (hand-built, Simple, x8)", "simple_local_rate_scale (+21%)"},
      {"bench-h200x2.csv", 2, "AllReduce", 1ull << 30, "allpairs (hand-built, Simple, x8)", "simple_local_rate_scale (+16%)"},
  };
  for (const Case& c : cases) {
    double measured = 0;
    const double e = simulated_row(c.file, c.ranks, c.collective, c.bytes, c.candidate, &measured);
    EXPECT_LE(e, 0.15) << c.collective << " " << c.bytes << " B " << c.candidate << " (" << measured << " us measured), "
                       << c.term << ": " << e * 100 << "% off";
  }
}

TEST(Calibration, CallCostOverridesAreChecked) {
  const sim::CallCosts k = sim::with_call_cost_overrides(sim::kCallCosts, {{"simple_alpha_extra_us", "5"}});
  EXPECT_EQ(k.simple_alpha_extra_us, 5.0);
  EXPECT_EQ(k.launch_us, sim::kCallCosts.launch_us);
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"no_such_cost", "1"}, {"ll_rate_scale", "0"}, {"launch_us", "-1"}, {"launch_us", "1x"}}) {
    try {
      sim::with_call_cost_overrides(sim::kCallCosts, {{name, value}});
      ADD_FAILURE() << name << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace weft
