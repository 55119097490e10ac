#include "sim/choose.hpp"

#include "compile/schedule.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

namespace {

/// Whether `c` beats `b` (sim::beats: faster, or as fast with fewer thread blocks per rank).
bool beats(const ScheduleCandidate& c, const ScheduleCandidate& b) { return sim::beats(c.time_us, c.tbs, b.time_us, b.tbs); }

/// How candidate `other` (called `name`) compares with the winner `w`: how much slower it is,
/// or that it ties (with how a tie is settled when `settle`).
std::string against(const ScheduleCandidate& w, const ScheduleCandidate& other, const std::string& name, bool next,
                    bool settle) {
  if (as_fast(other.time_us, w.time_us))
    return text::format("; %s is as fast with %d%s", name.c_str(), other.tbs,
                        settle ? " (a tie goes to fewer blocks, then to the one listed first)" : "");
  return text::format("; %s%s, %.1f us with %d (%.1f%% slower)", next ? "the next, " : "", name.c_str(), other.time_us,
                      other.tbs, 100.0 * (other.time_us / w.time_us - 1));
}

/// Why candidate `best` was chosen: its figures, the runner-up's, and the given schedule's
/// where it is neither.
std::string explain(const std::vector<ScheduleCandidate>& cs, int32_t best, uint64_t bytes, int32_t max_tbs) {
  const ScheduleCandidate& w = cs[best];
  int32_t second = -1, given = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(cs.size()); ++i) {
    if (i == best || !cs[i].error.empty()) continue;
    if (second < 0 || cs[i].time_us < cs[second].time_us) second = i;
    if (cs[i].scheduler == "as-given") given = i;
  }
  std::string why = text::format("%s runs %.1f us (%.1f GB/s busbw) with %d thread blocks per rank at %llu bytes",
                                 w.scheduler.c_str(), w.time_us, w.busbw_GBps, w.tbs, static_cast<unsigned long long>(bytes));
  auto name = [&](int32_t i) { return cs[i].scheduler + (i == given ? " (the file's own schedule)" : ""); };
  if (second >= 0) why += against(w, cs[second], name(second), true, true);
  if (given >= 0 && given != second)
    why += against(w, cs[given], name(given), false, second < 0 || !as_fast(cs[second].time_us, w.time_us));
  why += text::format(" (%zu %s, simulated%s)", cs.size(), cs.size() == 1 ? "candidate" : "candidates",
                      max_tbs > 0 ? text::format(", at most %d thread blocks per rank", max_tbs).c_str() : "");
  return why;
}

}  // namespace

std::vector<std::string> auto_schedulers(bool has_given) {
  std::vector<std::string> s;
  for (std::string_view n : scheduler_names()) s.emplace_back(n);
  if (has_given) s.emplace_back("as-given");
  return s;
}

ScheduleChoice choose_schedule(const Algorithm& algo, const Plan* given, const Topology& topo, const CompileOptions& base,
                               TuneOptions options, const std::vector<std::string>& schedulers) {
  if (options.bytes == 0) fail(ErrorCode::InvalidArgument, "choosing a schedule needs the call's size in bytes");
  ScheduleChoice out;
  if (options.max_tbs <= 0 && given) options.max_tbs = given->max_tbs_per_rank();
  out.max_tbs = std::max(options.max_tbs, 0);
  SimOptions so = options.sim;
  so.bytes = options.bytes;
  int32_t best = -1;
  std::optional<TuneResult> best_tune;
  for (const std::string& sched : schedulers) {
    ScheduleCandidate c;
    c.scheduler = sched;
    try {
      if (sched == "as-given") {
        if (!given) fail(ErrorCode::InvalidArgument, "as-given needs an MSCCL XML file's own schedule");
        const SimReport r = simulate(*given, topo, so);
        c.time_us = r.time_us, c.busbw_GBps = r.busbw_GBps, c.tb_idle_mean = r.tb_idle_mean;
        c.tbs = given->max_tbs_per_rank();
        c.variant = "the file's own thread blocks, steps and dependencies";
      } else {
        CompileOptions co = base;
        co.scheduler = sched;
        TuneResult t = autotune(algo, topo, co, options);
        const TuneTrial& tr = t.trials[t.chosen];
        c.time_us = tr.time_us, c.busbw_GBps = tr.busbw_GBps, c.tb_idle_mean = tr.tb_idle_mean, c.tbs = tr.tbs;
        c.variant = tr.label;
        if (best < 0 || beats(c, out.candidates[best])) best_tune = std::move(t);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Verify) throw;
      c.error = e.what();
    }
    out.candidates.push_back(c);
    const int32_t i = static_cast<int32_t>(out.candidates.size()) - 1;
    if (!c.error.empty()) continue;
    if (best < 0 || beats(c, out.candidates[best])) best = i;
  }
  if (best < 0) {
    std::string why;
    for (const ScheduleCandidate& c : out.candidates) why += (why.empty() ? "" : "; ") + c.scheduler + ": " + c.error;
    fail(ErrorCode::InvalidArgument, "no schedule of " + algo.name + " could be built: " + why);
  }
  const ScheduleCandidate& w = out.candidates[best];
  out.scheduler = w.scheduler;
  if (w.scheduler == "as-given") {
    out.plan = *given;
    out.plan.topology = topo.name;
  } else {
    out.compiled = std::move(best_tune->result);
    out.plan = out.compiled->plan;
  }
  out.reason = explain(out.candidates, best, options.bytes, out.max_tbs);
  return out;
}

}  // namespace weft::sim
