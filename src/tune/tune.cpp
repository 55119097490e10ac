#include "tune/tune.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>

#include <nlohmann/json.hpp>

#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "plan/hand_built.hpp"
#include "sim/call_model.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection.hpp"
#include "sim/simulator.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::tune {

namespace {

bool oneshot_collective(Collective c) {
  return c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
}

bool rooted(Collective c) { return c == Collective::Broadcast || c == Collective::Reduce; }

template <class T>
std::vector<T> or_default(const std::vector<T>& v, std::vector<T> dflt) {
  return v.empty() ? dflt : v;
}

void must_list(const std::vector<std::string>& known, const std::string& v, const char* what) {
  if (std::find(known.begin(), known.end(), v) == known.end()) {
    std::string names;
    for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
    fail(ErrorCode::InvalidArgument, std::string(what) + " '" + v + "' is not one a selection row names (" + names + ")");
  }
}

std::string range_text(uint64_t lo, uint64_t hi) {
  return lo == hi ? text::format_bytes(lo) : text::format_bytes(lo) + ".." + text::format_bytes(hi);
}

std::string us_text(double us) { return text::format("%.2f us", us); }

using ojson = nlohmann::ordered_json;

/// A row that runs `k` for collective `c` out of place (both placements for Broadcast and
/// Reduce, whose root alone is in place) on `ranks` ranks (0: any), for any size.
ojson row_of(Collective c, const Candidate& k, int ranks) {
  const Choice& ch = k.choice;
  ojson r;
  r["collectives"] = {std::string(to_string(c))};
  if (ranks > 0) r["ranks"] = {ranks, ranks};
  if (!rooted(c)) r["placement"] = "out";
  r["algorithm"] = ch.algorithm;
  if (!k.oneshot() && !is_hand_built_name(ch.algorithm)) {
    r["scheduler"] = ch.scheduler;
    if (ch.allocator != "state") r["allocator"] = ch.allocator;
  }
  r["protocol"] = ch.protocol;
  if (k.oneshot()) r["instances"] = "kernel";
  else r["instances"] = ch.instances;
  if (ch.microbatch_bytes > 0) r["microbatch_bytes"] = ch.microbatch_bytes;
  if (!ch.executor.empty()) r["executor"] = ch.executor;
  return r;
}

/// A table's text: the header fields, then one row per line (so that the reader's errors
/// name each row's line).
std::string table_text(const std::string& description, const std::vector<std::string>& rows) {
  std::string out = "{\n  \"format\": \"weft-selection\",\n  \"version\": 1,\n  \"description\": " +
                    ojson(description).dump() + ",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) out += "    " + rows[i] + (i + 1 < rows.size() ? ",\n" : "\n");
  return out + "  ]\n}\n";
}

}  // namespace

std::vector<uint64_t> whole_sizes(const std::vector<uint64_t>& sizes, int nranks) {
  const uint64_t unit = 4 * static_cast<uint64_t>(std::max(nranks, 1));
  std::vector<uint64_t> out;
  for (uint64_t s : sizes) {
    const uint64_t b = s / unit * unit;
    if (b > 0 && (out.empty() || out.back() < b)) out.push_back(b);
  }
  if (out.empty())
    fail(ErrorCode::InvalidArgument, text::format("no size holds one float32 per rank (%llu bytes on %d ranks)",
                                                  static_cast<unsigned long long>(unit), nranks));
  return out;
}

std::string Candidate::label() const {
  if (incumbent) return "default table (selection/default.json)";
  return oneshot() ? "oneshot (kernel)" : describe_choice(choice);
}

bool Candidate::oneshot() const { return !incumbent && choice.algorithm == kOneShot; }

Candidate incumbent_candidate() {
  Candidate k;
  k.incumbent = true;
  return k;
}

bool Candidate::same(const Choice& o) const {
  if (incumbent) return false;                    // no row names it: it is the table itself
  if (oneshot()) return o.algorithm == kOneShot;  // its blocks follow from the payload
  const Choice& c = choice;
  const bool compiled = !is_hand_built_name(c.algorithm);
  return c.algorithm == o.algorithm && c.protocol == o.protocol && c.instances == o.instances &&
         c.microbatch_bytes == o.microbatch_bytes && c.executor == o.executor &&
         (!compiled || (c.scheduler == o.scheduler && c.allocator == o.allocator));
}

std::vector<std::string> algorithms_for(Collective c, int nranks) {
  std::vector<std::string> out;
  if (oneshot_collective(c) && nranks >= 2 && oneshot_fits(c, 8ull * static_cast<uint64_t>(nranks), nranks))
    out.emplace_back(kOneShot);
  for (const std::string& h : hand_built_algorithms(c)) out.push_back(h);
  for (const std::string& a : builtin_algorithm_names()) {
    try {
      if (algorithm_collective(a, nranks) == c) out.push_back(a);
    } catch (const Error&) {
      // Written for another rank count or shape: not a candidate here.
    }
  }
  return out;
}

std::vector<Candidate> candidates(Collective c, int nranks, const SweepOptions& o) {
  const std::vector<std::string> valid = algorithms_for(c, nranks);
  // Asked for by name: those that run `c` (a list may serve several collectives); a file is
  // taken as given (building its plan says what is wrong with it).
  std::vector<std::string> algos = o.algorithms.empty() ? valid : std::vector<std::string>{};
  const std::vector<std::string> known = builtin_algorithm_names();
  for (const std::string& a : o.algorithms) {
    const bool named = a == kOneShot || is_hand_built_name(a) || source_kind(a) == SourceKind::Builtin;
    if (named && a != kOneShot && !is_hand_built_name(a) && std::find(known.begin(), known.end(), a) == known.end())
      fail(ErrorCode::InvalidArgument, "algorithm '" + a + "' is neither oneshot, a hand-built plan (ring, allpairs, chain) "
                                       "nor an algorithm of algorithms/");
    if (!named || std::find(valid.begin(), valid.end(), a) != valid.end()) algos.push_back(a);
  }
  if (algos.empty()) {
    std::string names;
    for (const std::string& v : valid) names += (names.empty() ? "" : ", ") + v;
    fail(ErrorCode::InvalidArgument, "none of the algorithms asked for runs " + std::string(to_string(c)) + " on " +
                                         std::to_string(nranks) + " ranks (those that do: " + names + ")");
  }
  const auto scheds = or_default(o.schedulers, {"hpds", "algo"});
  const auto protos = or_default(o.protocols, selection_protocols());
  const auto insts = or_default(o.instances, {2, 8, 24});
  const auto mbs = or_default(o.microbatches, {uint64_t{0}});
  const auto execs = or_default(o.executors, {std::string()});
  for (const std::string& s : scheds) {
    BuildOptions bo;
    bo.compile.scheduler = s;
    check_build_options(bo);
  }
  for (const std::string& p : protos) must_list(selection_protocols(), p, "protocol");
  for (const std::string& e : execs)
    if (!e.empty()) must_list(selection_executors(), e, "executor");
  for (int i : insts)
    if (i < 1 || i > 1024) fail(ErrorCode::InvalidArgument, "instances " + std::to_string(i) + " is not in 1..1024");
  for (uint64_t m : mbs)
    if (m != 0 && (m < 16 || m > (1ull << 40)))
      fail(ErrorCode::InvalidArgument, "micro-batch " + std::to_string(m) + " is not in 16 B..1 TiB");

  std::vector<Candidate> out;
  for (const std::string& a : algos) {
    if (a == kOneShot) {
      if (o.oneshot) out.push_back(Candidate{Choice{kOneShot, "LL", 1}});
      continue;
    }
    const bool hand_built = is_hand_built_name(a);
    for (const std::string& s : hand_built ? std::vector<std::string>{"hpds"} : scheds)
      for (const std::string& p : protos)
        for (int i : insts)
          for (uint64_t m : mbs)
            for (const std::string& e : execs) {
              Candidate k;
              k.choice.algorithm = a;
              k.choice.scheduler = s;
              k.choice.protocol = p;
              k.choice.instances = i;
              k.choice.microbatch_bytes = m;
              k.choice.executor = e;
              out.push_back(k);
            }
  }
  if (out.empty()) fail(ErrorCode::InvalidArgument, "no candidate to try for " + std::string(to_string(c)));
  return out;
}

bool applies(const Candidate& cand, Collective c, uint64_t bytes, int nranks) {
  return !cand.oneshot() || oneshot_fits(c, bytes, nranks);
}

std::vector<Winner> pick_winners(const Times& times, const std::vector<uint64_t>& sizes, long incumbent, double keep) {
  std::vector<Winner> out;
  for (size_t s = 0; s < sizes.size(); ++s) {
    Winner w;
    w.bytes = sizes[s];
    bool have = false, second = false;
    double runner = 0;
    for (size_t k = 0; k < times.size(); ++k) {
      const double us = times[k][s];
      if (!(us >= 0)) continue;
      if (!have || us < w.us) {
        if (have) {
          second = true;
          runner = w.us;
          w.runner_up = w.best;
        }
        have = true;
        w.best = k;
        w.us = us;
      } else if (!second || us < runner) {
        second = true;
        runner = us;
        w.runner_up = k;
      }
    }
    if (!have) continue;
    w.ratio = second ? (w.us > 0 ? runner / w.us : 1.0) : 0;
    if (incumbent >= 0 && static_cast<size_t>(incumbent) < times.size() && w.best != static_cast<size_t>(incumbent)) {
      const double inc = times[static_cast<size_t>(incumbent)][s];
      if (inc >= 0 && inc <= keep * w.us) {  // beaten by less than the margin: it keeps the size
        w.runner_up = w.best;
        w.ratio = inc > 0 ? w.us / inc : 1.0;
        w.best = static_cast<size_t>(incumbent);
        w.us = inc;
      }
    }
    out.push_back(w);
  }
  return out;
}

std::vector<Merged> merge_winners(const Tuned& t) {
  std::vector<Merged> out;
  for (size_t i = 0; i < t.winners.size(); ++i) {
    const Winner& w = t.winners[i];
    if (!out.empty() && out.back().candidate == w.best) {
      out.back().winners.push_back(i);
      continue;
    }
    Merged m;
    m.candidate = w.best;
    m.lo = out.empty() ? 0 : w.bytes;
    if (!out.empty()) out.back().hi = w.bytes - 1;
    m.winners.push_back(i);
    out.push_back(m);
  }
  return out;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char b[16];
  std::strftime(b, sizeof b, "%Y-%m-%d", &tm);
  return b;
}

std::string candidate_table(Collective c, const Candidate& k) {
  if (k.incumbent) return std::string(default_selection_text());
  return table_text("weft tune: one candidate, " + k.label(), {row_of(c, k, 0).dump()});
}

std::string selection_json(const std::vector<Tuned>& tuned, const Provenance& p, bool fallback) {
  const char* how = p.simulated ? "simulated" : "measured";
  std::vector<std::string> rows;
  std::string names;
  for (const Tuned& t : tuned) {
    names += (names.empty() ? "" : ", ") + std::string(to_string(t.collective));
    for (const Merged& m : merge_winners(t)) {
      if (t.candidates[m.candidate].incumbent) continue;  // those sizes keep default.json's rows
      ojson r = row_of(t.collective, t.candidates[m.candidate], t.ranks);
      // The byte range goes right after the rank range, where a reader looks for it.
      ojson ordered;
      for (auto it = r.begin(); it != r.end(); ++it) {
        ordered[it.key()] = it.value();
        if (it.key() == "ranks") ordered["bytes"] = {m.lo, m.hi == UINT64_MAX ? ojson(nullptr) : ojson(m.hi)};
      }
      r = ordered;
      const Winner& first = t.winners[m.winners.front()];
      const Winner& last = t.winners[m.winners.back()];
      double lo_us = first.us, hi_us = first.us, worst_ratio = 0;
      for (size_t i : m.winners) {
        lo_us = std::min(lo_us, t.winners[i].us);
        hi_us = std::max(hi_us, t.winners[i].us);
        if (t.winners[i].ratio > 0 && (worst_ratio == 0 || t.winners[i].ratio < worst_ratio)) worst_ratio = t.winners[i].ratio;
      }
      r["note"] = text::format("weft tune, %s on %s, %d ranks, out of place, %s: fastest at %s (%s%s)%s%s", how,
                               p.machine.c_str(), t.ranks, p.date.c_str(), range_text(first.bytes, last.bytes).c_str(),
                               lo_us == hi_us ? us_text(lo_us).c_str() : text::format("%.2f to %.2f us", lo_us, hi_us).c_str(),
                               worst_ratio > 0 ? text::format(", runner-up at least x%.2f", worst_ratio).c_str() : "",
                               m.lo < first.bytes ? "; smaller sizes not timed" : "",
                               m.hi > last.bytes ? "; larger sizes not timed" : "");
      rows.push_back(r.dump());
    }
  }
  if (fallback) {
    const ojson dflt = ojson::parse(default_selection_text());
    for (ojson r : dflt.at("rows")) {
      const std::string was = r.contains("note") ? r["note"].get<std::string>() : "";
      r["note"] = "weft's default table (calls the tuned rows do not cover)" + (was.empty() ? "" : ": " + was);
      rows.push_back(r.dump());
    }
  }
  return table_text(text::format("Written by weft tune: %s, %s on %s, %s.%s", names.c_str(), how, p.machine.c_str(),
                                     p.date.c_str(),
                                     fallback ? " The tuned rows come first; weft's default table's rows follow for every "
                                                "other call (other rank counts, in-place calls, other collectives)."
                                              : ""),
                    rows);
}

Progress::Progress(std::FILE* out, Collective c, size_t ncandidates, size_t nsizes)
    : out_(out), c_(c), n_(ncandidates), best_(nsizes, -1), best_label_(nsizes) {}

void Progress::timed(size_t i, const Candidate& cand, size_t size_index, uint64_t bytes, double us) {
  double& best = best_[size_index];
  if (us >= 0 && (best < 0 || us < best)) {
    best = us;
    best_label_[size_index] = cand.label();
  }
  if (!out_) return;
  std::fprintf(out_, "weft tune: %s %s: candidate %zu of %zu, %s: %s; best %s\n", std::string(to_string(c_)).c_str(),
               text::format_bytes(bytes).c_str(), i + 1, n_, cand.label().c_str(), us >= 0 ? us_text(us).c_str() : "failed",
               best >= 0 ? (us_text(best) + ", " + best_label_[size_index]).c_str() : "none yet");
  std::fflush(out_);
}

bool prune_after(const PruneRule& r, uint64_t bytes, double us, double best_before) {
  return r.factor > 0 && bytes >= r.from_bytes && best_before > 0 && us > r.factor * best_before;
}

void Progress::skipped(size_t i, const Candidate& cand, const std::string& why) {
  if (!out_) return;
  std::fprintf(out_, "weft tune: %s: candidate %zu of %zu, %s: skipped: %s\n", std::string(to_string(c_)).c_str(), i + 1, n_,
               cand.label().c_str(), why.c_str());
  std::fflush(out_);
}

Topology simulation_topology(const std::string& preset_or_file, int nranks) {
  Topology t = load_topology(preset_or_file);
  const int per_node = t.gpus_per_node;
  if (nranks == 0) nranks = per_node;
  if (nranks < 2)
    fail(ErrorCode::InvalidArgument, "tuning needs at least 2 ranks (one rank runs a copy, no plan)");
  if (nranks > per_node)
    fail(ErrorCode::InvalidArgument, text::format("topology %s has %d GPUs per node; the runtime's plans are for one node, "
                                                  "so --ranks must be at most %d",
                                                  t.name.c_str(), per_node, per_node));
  if (t.nodes != 1 || nranks != per_node) t.name += " (one node of " + std::to_string(nranks) + " GPUs)";
  t.nodes = 1;
  t.gpus_per_node = nranks;
  t.validate();
  return t;
}

Times simulate_times(Collective c, int nranks, const std::vector<Candidate>& cands, const std::vector<uint64_t>& sizes,
                     const Topology& topo, Progress& progress) {
  Times times(cands.size(), std::vector<double>(sizes.size(), -1));
  const uint64_t simple_slot = static_cast<uint64_t>(config::get_int("WEFT_SLOT_BYTES"));
  const uint64_t ll_slot = static_cast<uint64_t>(config::get_int("WEFT_LL_SLOT_BYTES"));
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& k = cands[i];
    if (k.oneshot()) {
      progress.skipped(i, k, "the simulator has no model of the one-shot kernel");
      continue;
    }
    const Choice& ch = k.choice;
    try {
      const Plan plan = make_plan(c, nranks, ch.algorithm, ch.protocol, ch.instances, false, 0, kDefaultFifoDepth,
                                  ch.scheduler, ch.allocator);
      const sim::Simulator simulator(plan, topo);
      const algo::Protocol proto = algo::protocol_from_string(ch.protocol).value_or(algo::Protocol::Simple);
      const uint64_t slot = sim::runtime_slot_data_bytes(proto, simple_slot, ll_slot);
      const uint64_t chunks = static_cast<uint64_t>(std::max(plan.input_chunks, plan.output_chunks));
      for (size_t s = 0; s < sizes.size(); ++s) {
        if (sizes[s] < chunks) continue;  // less than a byte per chunk slot
        sim::SimOptions so;
        so.bytes = sizes[s];
        so.runtime_microbatch = true;
        so.staging_slot_bytes = slot;
        if (ch.microbatch_bytes > 0) {
          so.runtime_microbatch = false;
          so.microbatch_bytes = std::min(simulator.runtime_microbatch_bytes(slot), ch.microbatch_bytes);
        }
        // As `weft tune` times a call on GPUs: the runtime's protocol, calls back to back, rank 0's mean.
        sim::set_runtime_protocol(so, proto);
        sim::set_back_to_back(so, false);
        times[i][s] = sim::per_call_us(simulator.run(so), so, false);
        progress.timed(i, k, s, sizes[s], times[i][s]);
      }
    } catch (const Error& e) {
      progress.skipped(i, k, e.what());
    }
  }
  return times;
}

std::string winners_text(const Tuned& t) {
  text::Table tab({"size", "winner", "time(us)", "runner-up", "ratio"});
  for (const Winner& w : t.winners)
    tab.add_row({text::format_bytes(w.bytes), t.candidates[w.best].label(), text::format("%.2f", w.us),
                 w.ratio > 0 ? t.candidates[w.runner_up].label() : "-", w.ratio > 0 ? text::format("%.2f", w.ratio) : "-"});
  return tab.str();
}

}  // namespace weft::tune
