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
  // scripts/fit_calibration.py: 489 of 803 within 15%, median |error| 11.8% (the model before
  // back-to-back calls, polled receives and LL128: 363 and 17.9%).
  EXPECT_GE(f.within, 480) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.125);
}

TEST(Calibration, HeldOutRowsOfFourH200) {
  // The 2 MiB rows, which the fit never saw: 234 of 354 within 15%, median |error| 9.5%.
  const std::vector<Row> rows = load_fixture(kDir + "tune-h200x4.csv", 4);
  const Fit f = fit_ranks(rows, 4, held_out);
  EXPECT_EQ(f.matched, 354);
  EXPECT_GE(f.within, 228) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.10);
}

TEST(Calibration, HeldOutRowsOfTwoH200) {
  // AllReduce on 2 ranks from weft bench (allpairs x8-x24, ring_allreduce and hm_allreduce
  // x8/x24, 256 KiB to 1 GiB), none seen by the fit: 12 of 17 within 15%; hm_allreduce at
  // 128 MiB and 1 GiB measured twice the ring's time and is predicted at the ring's (-53%).
  const Fit f = fit_ranks(load_fixture(kDir + "bench-h200x2.csv", 2), 2, [](const Row&) { return true; });
  EXPECT_EQ(f.matched, 17);
  EXPECT_GE(f.within, 12) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.10);
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
