#include "tune/auto_schedule.hpp"

#include "compile/schedule.hpp"
#include "plan/builder.hpp"
#include "plan/plan_source.hpp"
#include "sim/call_model.hpp"
#include "sim/choose.hpp"
#include "sim/simulator.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

namespace {

/// choose_schedule's tie rule (sim/choose.hpp): faster, or as fast with fewer thread blocks.
bool faster(const AutoCandidate& a, const AutoCandidate& b) { return sim::beats(a.time_us, a.tbs, b.time_us, b.tbs); }

/// Why candidate `best` won: its figures, then the runner-up's (and the file's own
/// schedule's where it is neither).
std::string explain(const AutoChoice& ch, size_t best, Collective c, const std::string& topo) {
  const auto& cs = ch.candidates;
  const AutoCandidate& w = cs[best];
  std::string why = text::format("%s for %s at %llu bytes: %.1f us with %d thread blocks per rank", w.scheduler.c_str(),
                                 std::string(to_string(c)).c_str(), static_cast<unsigned long long>(ch.bytes), w.time_us, w.tbs);
  size_t second = cs.size(), given = cs.size(), built = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!cs[i].error.empty()) continue;
    ++built;
    if (i == best) continue;
    if (second == cs.size() || faster(cs[i], cs[second])) second = i;
    if (cs[i].scheduler == "as-given") given = i;
  }
  auto against = [&](size_t i, const char* label) {
    const AutoCandidate& o = cs[i];
    const std::string name = o.scheduler + (o.scheduler == "as-given" ? " (the file's own schedule)" : "");
    if (sim::as_fast(o.time_us, w.time_us))
      return text::format("; %s%s is as fast with %d (a tie goes to fewer blocks, then to the one listed first)", label,
                          name.c_str(), o.tbs);
    return text::format("; %s%s %.1f us with %d (%.1f%% slower)", label, name.c_str(), o.time_us, o.tbs,
                        100.0 * (o.time_us / w.time_us - 1));
  };
  if (second < cs.size()) why += against(second, "the next, ");
  if (given < cs.size() && given != second) why += against(given, "");
  why += text::format(" (%zu of %zu %s built and simulated on topology %s)", built, cs.size(),
                      cs.size() == 1 ? "candidate" : "candidates", topo.c_str());
  return why;
}

}  // namespace

std::vector<std::string> auto_candidates(const std::string& algorithm) {
  std::vector<std::string> s;
  for (std::string_view n : scheduler_names()) s.emplace_back(n);
  if (source_kind(algorithm) == SourceKind::MscclXml) s.emplace_back("as-given");
  return s;
}

AutoChoice choose_auto_schedule(Collective c, int nranks, const std::string& algorithm, const std::string& protocol,
                                int instances, bool in_place, int root, int fifo_depth, const std::string& allocator,
                                const std::vector<int>& node_of_rank, uint64_t bytes, uint64_t slot_bytes) {
  AutoChoice out;
  out.bytes = auto_bucket_bytes(auto_bucket(bytes));
  const Topology topo = node_topology(nranks, node_of_rank);
  sim::SimOptions o;  // as `weft bench --predict` simulates a runtime call
  o.bytes = out.bytes;
  o.runtime_microbatch = true;
  o.staging_slot_bytes = slot_bytes;
  o.fifo_depth = fifo_depth;
  // The runtime's protocol figures (one call: the choice compares schedules of one call).
  sim::set_runtime_protocol(o, algo::protocol_from_string(protocol).value_or(algo::Protocol::Simple));
  size_t best = SIZE_MAX;
  ErrorCode first_code = ErrorCode::InvalidArgument;
  std::vector<Plan> plans;
  for (const std::string& sched : auto_candidates(algorithm)) {
    AutoCandidate cand;
    cand.scheduler = sched;
    Plan p;
    try {
      p = make_plan(c, nranks, algorithm, protocol, instances, in_place, root, fifo_depth, sched, allocator, node_of_rank);
      cand.time_us = sim::Simulator(p, topo).run(o).time_us;
      cand.tbs = p.max_tbs_per_rank();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Verify && e.code() != ErrorCode::InvalidUsage)
        throw;
      if (out.candidates.empty()) first_code = e.code();
      cand.error = e.what();
    }
    out.candidates.push_back(cand);
    plans.push_back(std::move(p));
    const size_t i = out.candidates.size() - 1;
    if (cand.error.empty() && (best == SIZE_MAX || faster(cand, out.candidates[best]))) best = i;
  }
  if (best == SIZE_MAX) {
    std::string why;
    for (const AutoCandidate& a : out.candidates) why += (why.empty() ? "" : "; ") + a.scheduler + ": " + a.error;
    fail(first_code, "scheduler auto: no schedule of '" + algorithm + "' could be built for " +
                         std::string(to_string(c)) + " on " + std::to_string(nranks) + " ranks: " + why);
  }
  out.scheduler = out.candidates[best].scheduler;
  out.plan = std::move(plans[best]);
  out.reason = explain(out, best, c, topo.name);
  return out;
}

}  // namespace weft
