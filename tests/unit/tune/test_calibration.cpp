// The simulator's runtime model (sim/call_model.hpp) against the measured `weft tune` times it
// was fitted to: tests/data/calibration/tune-h200x4.csv, every candidate weft tune timed on
// 4 x H200 at 256 KiB to 128 MiB (docs/cost-model.md, "Calibration against weft tune").
// The figures of the fit, not issue 32's 15% on every candidate (not reached; the doc says
// where): a change that breaks the calibration drops these counts.
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

std::string protocol_of(const std::string& label) {
  for (const char* p : {"LL128", "LL", "Simple"})
    if (label.find(std::string(", ") + p + ",") != std::string::npos) return p;
  return "?";
}

struct Fit {
  int matched = 0, within = 0;
  double max_abs_error = 0;
  std::vector<double> abs_errors;
};

// Simulates every fixture candidate of `protocols` as `weft tune --simulate --ranks R
// --instances 8,24 --protocols Simple,LL,LL128 -a ALGOS` does and compares.
Fit fit_ranks(const std::vector<Row>& rows, int ranks, const std::set<std::string>& protocols) {
  std::map<std::string, std::map<std::pair<std::string, uint64_t>, double>> measured;  // collective -> (label, bytes)
  std::map<std::string, std::set<uint64_t>> sizes;
  for (const Row& r : rows)
    if (protocols.count(protocol_of(r.candidate))) {
      measured[r.collective][{r.candidate, r.bytes}] = r.us;
      sizes[r.collective].insert(r.bytes);
    }
  const Topology topo = tune::simulation_topology("h200-1x8", ranks);
  tune::SweepOptions sweep;
  std::set<std::string> algos;
  for (const Row& r : rows) algos.insert(r.candidate.substr(0, r.candidate.find(' ')));
  sweep.algorithms.assign(algos.begin(), algos.end());
  sweep.instances = {8, 24};
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

TEST(Calibration, FittedModelOnFourH200) {
  const std::vector<Row> rows = load_fixture(kDir + "tune-h200x4.csv", 4);
  ASSERT_GT(rows.size(), 1000u);
  int fitted_rows = 0;
  for (const Row& r : rows) fitted_rows += protocol_of(r.candidate) != "LL128";
  const Fit f = fit_ranks(rows, 4, {"Simple", "LL"});
  // Every measured Simple and LL candidate is simulated (a renamed candidate shows here).
  EXPECT_EQ(f.matched, fitted_rows);
  // scripts/fit_calibration.py: 438 of 781 within 15%, median |error| 12.9%; with the
  // figures before the fit (from the 2-GPU rows alone) 186 and 38%.
  EXPECT_GE(f.within, 430) << "of " << f.matched;
  EXPECT_LE(median(f.abs_errors), 0.135);
}

TEST(Calibration, TwoH200RowsStayWithinTheTarget) {
  // AllReduce on 2 ranks, the default table's allpairs: 1 MiB, 256 MiB, 1 GiB (docs/cost-model.md);
  // the fit holds them within 15% (+12%, +14%, +15.0%).
  const Fit f = fit_ranks(load_fixture(kDir + "bench-h200x2.csv", 2), 2, {"Simple"});
  EXPECT_EQ(f.matched, 3);
  EXPECT_LE(f.max_abs_error, 0.152);
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
