#include "sim/choose.hpp"

#include "compile/schedule.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

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
        if (best < 0 || c.time_us < out.candidates[best].time_us * (1 - 1e-9) ||
            (c.time_us <= out.candidates[best].time_us * (1 + 1e-9) && c.tbs < out.candidates[best].tbs))
          best_tune = std::move(t);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Verify) throw;
      c.error = e.what();
    }
    out.candidates.push_back(c);
    const int32_t i = static_cast<int32_t>(out.candidates.size()) - 1;
    if (!c.error.empty()) continue;
    if (best < 0 || c.time_us < out.candidates[best].time_us * (1 - 1e-9) ||
        (c.time_us <= out.candidates[best].time_us * (1 + 1e-9) && c.tbs < out.candidates[best].tbs))
      best = i;
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
  // Why: against the runner-up.
  int32_t second = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(out.candidates.size()); ++i)
    if (i != best && out.candidates[i].error.empty() && (second < 0 || out.candidates[i].time_us < out.candidates[second].time_us))
      second = i;
  out.reason = text::format("%s runs %.1f us (%.1f GB/s busbw) with %d thread blocks per rank at %llu bytes", w.scheduler.c_str(),
                            w.time_us, w.busbw_GBps, w.tbs, static_cast<unsigned long long>(options.bytes));
  if (second >= 0) {
    const ScheduleCandidate& s = out.candidates[second];
    if (s.time_us <= w.time_us * (1 + 1e-9))
      out.reason += text::format("; %s is as fast with %d (a tie goes to fewer blocks, then to the one listed first)",
                                 s.scheduler.c_str(), s.tbs);
    else
      out.reason += text::format("; the next, %s, %.1f us with %d (%.1f%% slower)", s.scheduler.c_str(), s.time_us, s.tbs,
                                 100.0 * (s.time_us / w.time_us - 1));
  }
  out.reason += text::format(" (%zu candidates, simulated%s)", out.candidates.size(),
                             out.max_tbs > 0 ? text::format(", at most %d thread blocks per rank", out.max_tbs).c_str() : "");
  return out;
}

}  // namespace weft::sim
