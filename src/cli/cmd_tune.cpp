// `weft tune [COLLECTIVE...]`: sweeps the candidates of each collective (algorithm,
// scheduler, protocol, instances, micro-batch, executor) per size, on this machine's GPUs as
// `weft bench` times them (tune_gpu.cpp) or on the simulator where there is none (or with
// --simulate), prints the winners and writes the selection table that records them (-o).
// docs/tune.md describes it.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "sim/call_model.hpp"
#include "sim/cost_model.hpp"
#include "tune/tune.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#if WEFT_HAVE_CUDA
#include "cli/tune_gpu.hpp"
#endif

namespace weft::cli {

namespace {

struct TuneArgs {
  std::vector<std::string> collectives;
  std::string sizes = "8:256M";
  double factor = 2;
  int ranks = 0, warmup = 5, iters = 20;
  double prune = 1.5, keep = 1.05;
  std::string prune_from = "16M";
  bool simulate = false, quiet = false, no_check = false, no_fallback = false;
  std::string topology = "h200-1x8";
  std::string output;
  std::vector<std::string> algorithms, schedulers, protocols, instances, microbatches, executors;
  std::vector<std::string> cost, call_cost;  ///< simulator: topology and runtime figures, name=value,...
};

/// Repeated name=value,... options merged into one map (a later name wins).
std::map<std::string, std::string> kv_options(const char* option, const std::vector<std::string>& values) {
  std::map<std::string, std::string> out;
  parse_option(option, [&] {
    for (const std::string& v : values)
      for (auto& [k, x] : text::parse_kv_list(v)) out[k] = x;
    return 0;
  });
  return out;
}

/// Splits repeated, comma-separated option values into one list.
std::vector<std::string> words(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values)
    for (const std::string& w : text::split(v, ','))
      if (!text::trim(w).empty()) out.emplace_back(text::trim(w));
  return out;
}

/// FROM, FROM x factor, ... up to TO; more than 64 sizes is an error.
std::vector<uint64_t> size_list(const TuneArgs& a) {
  auto colon = a.sizes.find(':');
  const uint64_t from = parse_option("--sizes", [&] {
    return text::parse_bytes(colon == std::string::npos ? a.sizes : a.sizes.substr(0, colon));
  });
  const uint64_t to =
      colon == std::string::npos ? from : parse_option("--sizes", [&] { return text::parse_bytes(a.sizes.substr(colon + 1)); });
  if (from == 0 || to < from) fail(ErrorCode::InvalidArgument, "--sizes wants FROM:TO with 0 < FROM <= TO");
  if (!(a.factor > 1 && a.factor <= 1024))  // also refuses nan
    fail(ErrorCode::InvalidArgument, text::format("--factor %g must be more than 1 and at most 1024", a.factor));
  std::vector<uint64_t> sizes;
  for (double s = static_cast<double>(from); s <= static_cast<double>(to); s = std::max(s + 1, std::ceil(s * a.factor))) {
    if (sizes.size() == 64)
      fail(ErrorCode::InvalidArgument, text::format("--sizes %s with --factor %.10g makes more than 64 sizes, the most "
                                                    "weft tune takes; raise --factor or narrow --sizes",
                                                    a.sizes.c_str(), a.factor));
    sizes.push_back(static_cast<uint64_t>(s));
  }
  return sizes;
}

tune::SweepOptions sweep_options(const TuneArgs& a) {
  tune::SweepOptions o;
  o.algorithms = words(a.algorithms);
  o.schedulers = words(a.schedulers);
  o.protocols = words(a.protocols);
  for (const std::string& w : words(a.instances)) {
    if (w.empty() || w.size() > 4 || w.find_first_not_of("0123456789") != std::string::npos)
      fail(ErrorCode::InvalidArgument, "--instances: '" + w + "' is not a number of thread blocks per link (1 to 1024)");
    o.instances.push_back(std::stoi(w));
  }
  for (const std::string& w : words(a.microbatches))
    o.microbatches.push_back(w == "auto" ? 0 : parse_option("--microbatch", [&] { return text::parse_bytes(w); }));
  for (const std::string& w : words(a.executors)) o.executors.push_back(w == "default" ? "" : w);
  return o;
}

void print_results(const std::vector<tune::Tuned>& tuned, const tune::Provenance& p) {
  for (const tune::Tuned& t : tuned) {
    std::printf("#\n# %s, %d ranks, out of place, float32: %zu candidates, winners per size (%s)\n",
                std::string(to_string(t.collective)).c_str(), t.ranks, t.candidates.size(), p.simulated ? "simulated" : "measured");
    if (t.winners.empty()) std::printf("# no candidate ran\n");
    else std::fputs(tune::winners_text(t).c_str(), stdout);
  }
  std::fflush(stdout);
}

int run(const TuneArgs& a) {
  // What overrides the selection table in the runtime (read as the communicator reads it).
  for (const char* v : {"WEFT_ALGO", "WEFT_PROTO", "WEFT_INSTANCES", "WEFT_MICROBATCH_BYTES"}) {
    const bool numeric = std::string(v) == "WEFT_INSTANCES" || std::string(v) == "WEFT_MICROBATCH_BYTES";
    if (numeric ? config::get_int(v) != 0 : !config::get_string(v).empty())
      fail(ErrorCode::InvalidArgument, std::string(v) + " is set: it would override every candidate; unset it to tune");
  }
  std::vector<Collective> colls;
  for (const std::string& name : a.collectives.empty() ? std::vector<std::string>{"AllReduce", "AllGather", "ReduceScatter"}
                                                       : a.collectives) {
    auto c = collective_from_string(name);
    if (!c || *c == Collective::Custom)
      fail(ErrorCode::InvalidArgument, "unknown collective '" + name +
                                           "' (AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce)");
    colls.push_back(*c);
  }
  // The output file is checked before any work: a run whose table cannot be kept is refused.
  if (!a.output.empty() && !std::ofstream(a.output, std::ios::app))
    fail(ErrorCode::System, "cannot write the -o file '" + a.output + "': " + std::strerror(errno));
  tune::SweepOptions sweep = sweep_options(a);
  tune::Provenance prov;
  prov.date = tune::today();
  std::vector<tune::Tuned> tuned;
  int status = 0;
  bool measured = false;
  // Parsed whether or not a GPU times the sweep, so that a bad value is an error everywhere.
  const uint64_t prune_from = parse_option("--prune-from", [&] { return text::parse_bytes(a.prune_from); });
#if WEFT_HAVE_CUDA
  if (!a.simulate) {
    TuneGpuOptions g;
    g.collectives = colls;
    g.ranks = a.ranks;
    g.sizes = size_list(a);
    g.warmup = a.warmup;
    g.iters = a.iters;
    g.check = !a.no_check;
    g.prune.factor = a.prune;
    g.prune.from_bytes = prune_from;
    g.keep = a.keep;
    g.quiet = a.quiet;
    g.sweep = sweep;
    status = tune_gpu(g, tuned, prov.machine);
    measured = status != 77;
    if (!measured) status = 0;
  }
#endif
  if (!measured) {
    // No GPU in use: the simulator, and the output says so first.
    Topology topo = tune::simulation_topology(a.topology, a.ranks);
    parse_option("--cost", [&] { sim::apply_cost_overrides(topo, kv_options("--cost", a.cost)); });
    parse_option("--call-cost",
                 [&] { sim::set_call_costs(sim::with_call_cost_overrides(sim::call_costs(), kv_options("--call-cost", a.call_cost))); });
    const int R = topo.num_gpus();
    prov.simulated = true;
    prov.machine = "topology " + topo.name;
    std::printf("# weft tune: %s; every time below is SIMULATED on topology %s, %d ranks, not measured (cost model: "
                "docs/cost-model.md: the runtime's launch, calls back to back, Simple, LL and LL128; no executor or one-shot kernel)\n",
                a.simulate ? "--simulate" : "no GPU in use", topo.name.c_str(), R);
    std::fflush(stdout);
    // Simple alone unless asked (docs/tune.md).
    if (sweep.protocols.empty()) sweep.protocols = {"Simple"};
    if (!sweep.executors.empty() && !a.quiet)
      std::fprintf(stderr, "weft tune: the simulator models no executor: each executor's rows time alike\n");
    const std::vector<uint64_t> sizes = tune::whole_sizes(size_list(a), R);
    for (Collective c : colls) {
      tune::Tuned t;
      t.collective = c;
      t.ranks = R;
      t.sizes = sizes;
      t.candidates = tune::candidates(c, R, sweep);
      tune::Progress progress(a.quiet ? nullptr : stderr, c, t.candidates.size(), sizes.size());
      t.times = tune::simulate_times(c, R, t.candidates, sizes, topo, progress);
      t.winners = tune::pick_winners(t.times, sizes);
      tuned.push_back(std::move(t));
    }
  } else {
    std::printf("# weft tune: measured on %s, %d ranks (one process per GPU), warmup %d, iters %d%s\n", prov.machine.c_str(),
                tuned.empty() ? 0 : tuned[0].ranks, a.warmup, a.iters, a.no_check ? ", results not checked" : "");
  }
  print_results(tuned, prov);
  bool any = false;
  for (const tune::Tuned& t : tuned) any = any || !t.winners.empty();
  if (!any) {
    std::fprintf(stderr, "weft tune: no candidate ran at any size: no table written\n");
    return 1;
  }
  if (!a.output.empty()) {
    std::ofstream f(a.output, std::ios::trunc);
    f << tune::selection_json(tuned, prov, !a.no_fallback);
    f.close();
    if (!f) fail(ErrorCode::System, "writing the -o file '" + a.output + "' failed");
    std::printf("# wrote %s: a weft-selection table (%s); run it with WEFT_SELECTION=%s\n", a.output.c_str(),
                prov.simulated ? "SIMULATED" : "measured", a.output.c_str());
  }
  return status;
}

}  // namespace

void register_tune(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune",
                                 "Sweep algorithm, scheduler, protocol, instances, micro-batch and executor per size on this "
                                 "machine's GPUs (the simulator where there are none, and it says so) and write the selection "
                                 "table of the winners (-o)");
  cmd->add_option("collectives", a->collectives, "AllReduce AllGather ReduceScatter Broadcast Reduce AllToAll (default: the first three)");
  cmd->add_option("--sizes", a->sizes, "FROM:TO payload bytes per rank, with K/M/G suffixes (default 8:256M)");
  cmd->add_option("--factor", a->factor, "size multiplier between sizes, more than 1 and at most 1024 (default 2)");
  cmd->add_option("--ranks", a->ranks, "GPUs (one process each), or the simulated node's GPUs; 2 to 4096 (default 0: all)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--warmup", a->warmup, "GPU: untimed calls per candidate and size (default 5)")->check(CLI::Range(0, 1000000));
  cmd->add_option("--iters", a->iters, "GPU: timed calls per candidate and size (default 20)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--prune", a->prune,
                  "GPU: a candidate more than F x the best so far at a size from --prune-from on is not timed at larger sizes (default 1.5; 0: off)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--keep", a->keep,
                  "GPU: the default table's choice is timed too and keeps a size unless a candidate is more than F x faster "
                  "(default 1.05; 0: not timed)")
      ->check([](const std::string& v) {
        char* end = nullptr;
        const double f = std::strtod(v.c_str(), &end);
        return end != v.c_str() && *end == 0 && (f == 0 || (f >= 1 && f <= 1e6)) ? std::string()
                                                                                  : std::string("--keep wants 0 or a factor from 1 to 1e6");
      });
  cmd->add_option("--prune-from", a->prune_from, "GPU: the smallest size --prune looks at (default 16M)");
  cmd->add_flag("--no-check", a->no_check, "GPU: do not check each candidate's result against the host reference");
  cmd->add_flag("--simulate", a->simulate, "use the simulator even where there are GPUs");
  cmd->add_option("--topology,-t", a->topology, "simulator: topology preset or file, one node of it (default h200-1x8)");
  cmd->add_option("--algo,-a", a->algorithms,
                  "algorithms to try, comma-separated or repeated (default: every one a selection row can name for the "
                  "collective and rank count: oneshot, the hand-built plans, the algorithms of algorithms/)");
  cmd->add_option("--schedulers", a->schedulers, "schedulers of compiled plans (default hpds,algo)");
  cmd->add_option("--protocols", a->protocols, "protocols (default: every one a row accepts; Simple on the simulator)");
  cmd->add_option("--instances", a->instances, "thread blocks per link (default 2,8,24)");
  cmd->add_option("--microbatch", a->microbatches,
                  "micro-batch bytes per chunk slot, or auto: the runtime's sizing (default auto)");
  cmd->add_option("--executors", a->executors, "interp, gen or default (a row without executor: the runtime's own) (default: default)");
  cmd->add_option("--cost", a->cost, "simulator: override topology cost figures, name=value,... (docs/cost-model.md)");
  cmd->add_option("--call-cost", a->call_cost,
                  "simulator: override the runtime's call figures, name=value,... (docs/cost-model.md, 'Small messages')");
  cmd->add_option("-o,--output", a->output, "write the selection table (weft-selection JSON) to this file");
  cmd->add_flag("--no-fallback", a->no_fallback, "write the tuned rows only, without weft's default rows after them");
  cmd->add_flag("--quiet,-q", a->quiet, "no progress on standard error");
  cmd->callback([a] {
    try {
      set_exit(run(*a));
    } catch (const Error& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "weft tune: %s\n", e.what());
      set_exit(e.code() == ErrorCode::Internal ? 3 : 2);
    }
  });
}

}  // namespace weft::cli
