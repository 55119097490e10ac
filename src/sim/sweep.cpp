#include "sim/sweep.hpp"

#include <algorithm>
#include <chrono>

#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "sim/autotune.hpp"
#include "sim/call_model.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

std::vector<uint64_t> parse_size_range(const std::string& range) {
  std::vector<std::string> parts = text::split(range, ':');
  auto bad = [&](const std::string& why) {
    fail(ErrorCode::InvalidArgument, "size range '" + range + "' " + why + " (expected FROM:TO or FROM:TO:FACTOR, e.g. 1M:1G)");
  };
  if (parts.size() != 2 && parts.size() != 3) bad("is malformed");
  const uint64_t from = text::parse_bytes(parts[0]), to = text::parse_bytes(parts[1]);
  uint64_t factor = 2;
  if (parts.size() == 3) {
    const std::string f(text::trim(parts[2]));
    if (f.empty() || f.find_first_not_of("0123456789") != std::string::npos || f.size() > 6) bad("has a bad factor");
    factor = std::stoull(f);
    if (factor < 2) bad("needs a factor of at least 2");
  }
  if (from == 0) bad("starts at 0 bytes");
  if (to < from) bad("ends before it starts");
  std::vector<uint64_t> sizes;
  for (uint64_t s = from; s <= to; s *= factor) {
    sizes.push_back(s);
    if (sizes.size() > 64) bad("has more than 64 sizes");
    if (s > to / factor) break;
  }
  return sizes;
}

namespace {

/// One scheduler tuned per size (SweepSpec::tune).
void run_tuned(const SweepSpec& spec, const PlanSource& src, const CompileOptions& base, const SweepCallback& on_report) {
  TuneOptions to;
  to.sim = spec.options;
  to.tolerance = spec.tolerance;
  to.max_idle = spec.max_idle;
  to.idle_cost = spec.idle_cost;
  to.max_tbs = spec.max_tbs > 0 ? spec.max_tbs : src.given ? src.given->max_tbs_per_rank() : 0;
  CompileOptions c = base;
  c.max_tbs = 0;
  for (uint64_t bytes : spec.sizes) {
    to.bytes = bytes;
    const auto t0 = std::chrono::steady_clock::now();
    TuneResult tr = autotune(*src.algorithm, spec.topology, c, to);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Simulator sim(tr.result.plan, spec.topology, !spec.options.trace, spec.max_memory_bytes);
    SimOptions o = spec.options;
    o.bytes = bytes;
    SimReport r = sim.run(o);
    r.variant = tr.trials[tr.chosen].label;
    r.variant_reason = tr.reason;
    on_report(sim, r, secs);
  }
}

}  // namespace

void run_sweep(const SweepSpec& spec, const SweepCallback& on_report) {
  // The plan builder (plan/builder.hpp) loads the source sized to the topology and verifies
  // it once: what the verifier refuses is never compiled nor simulated (a wrong algorithm has
  // no meaningful time; an XML file's as-given schedule moves the same transfers). Each plan
  // is deadlock-checked at the simulated FIFO depth.
  const PlanSource src = load_source(spec.algorithm, spec.topology, SourceOptions{spec.params});
  const bool plan_file = src.kind == SourceKind::PlanFile;
  if (plan_file && spec.schedulers.size() > 1)
    fail(ErrorCode::InvalidArgument, spec.algorithm + " is a plan file, scheduled already: it takes no list of schedulers");
  for (const std::string& sched : spec.schedulers) {
    BuildOptions bo;
    bo.compile.scheduler = sched;
    bo.compile.allocator = spec.allocator;
    bo.compile.instances = spec.instances;
    bo.compile.max_tbs = spec.max_tbs;
    bo.compile.pace = spec.pace;
    bo.compile.in_place = compile_in_place(src, spec.in_place);
    bo.compile.max_memory_bytes = spec.max_memory_bytes;
    bo.compile.fifo_depth = spec.options.fifo_depth;
    if (spec.tune && sched != "as-given" && !plan_file && spec.instances == 0) {
      run_tuned(spec, src, bo.compile, on_report);
      continue;
    }
    const BuiltPlan b = build_plan(src, spec.topology, bo);
    // "Compile time" is the import's for an as-given schedule, the load's for a plan file.
    const double secs = b.compiled ? b.build_seconds : src.parse_seconds + b.build_seconds;
    // A traced run keeps instance siblings apart (merging is exact, but the trace then has
    // one track per thread block of the plan).
    Simulator sim(b.plan(), spec.topology, !spec.options.trace, spec.max_memory_bytes);
    for (uint64_t bytes : spec.sizes) {
      SimOptions o = spec.options;
      o.bytes = bytes;
      on_report(sim, sim.run(o), secs);
    }
  }
}

namespace {

// The runtime's one-shot kernel where it carries the call (sim/call_model.hpp): no plan, a
// closed form per call with its launch, unlike the tables above (the kernels' time alone).
void print_oneshot_rows(const BenchSpec& spec, const Topology& topo, const std::vector<uint64_t>& sizes, std::ostream& out) {
  const int32_t R = topo.num_gpus();
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    if (!spec.collectives.empty() && std::find(spec.collectives.begin(), spec.collectives.end(), c) == spec.collectives.end())
      continue;
    std::vector<SimReport> rows;
    for (uint64_t bytes : sizes) {
      if (!oneshot_carries(c, bytes, R)) continue;
      SimReport r;
      r.algorithm = "oneshot";
      r.collective = c;
      r.ranks = R;
      r.bytes = bytes;
      r.topology = topo.name;
      r.time_us = oneshot_time_us(c, bytes, R, false);
      r.algbw_GBps = static_cast<double>(bytes) / r.time_us / 1e3;
      r.busbw_GBps = r.algbw_GBps * bus_factor(c, R);
      rows.push_back(r);
    }
    if (rows.empty()) continue;
    if (spec.csv)
      for (const SimReport& r : rows)
        *spec.csv << "oneshot," << to_string(c) << ',' << r.bytes << ',' << r.bytes / spec.dtype_bytes << ',' << spec.dtype << ','
                  << r.time_us << ',' << r.algbw_GBps << ',' << r.busbw_GBps << ",\n";
    if (spec.json) {
      for (const SimReport& r : rows) out << report_to_json(r) << "\n";
      continue;
    }
    out << text::format("#\n# oneshot (%s, %d ranks): the runtime's one-shot kernel, closed form per call, launch "
                        "included (docs/cost-model.md, \"Small messages\")\n",
                        std::string(to_string(c)).c_str(), R);
    text::Table t({"size", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)"});
    for (const SimReport& r : rows)
      t.add_row({std::to_string(r.bytes), std::to_string(r.bytes / spec.dtype_bytes), spec.dtype, text::format("%.1f", r.time_us),
                 text::format("%.2f", r.algbw_GBps), text::format("%.2f", r.busbw_GBps)});
    out << t.str();
  }
}

}  // namespace

int run_simulated_bench(const BenchSpec& spec, std::ostream& out) {
  const Topology topo = load_topology(spec.topology);
  const std::vector<uint64_t> sizes = spec.sizes.empty() ? parse_size_range("1M:1G") : spec.sizes;
  const std::vector<std::string> algos = spec.algorithms.empty() ? builtin_algorithm_names() : spec.algorithms;
  out << text::format("# weft bench: no GPU in use; every figure below is SIMULATED on topology %s (%d GPUs), "
                      "not measured (cost model: docs/cost-model.md)\n",
                      topo.name.c_str(), topo.num_gpus());
  const bool runtime_shape = spec.runtime_shape && topo.nodes == 1;
  constexpr int32_t kRuntimeInstances = 24;  // src/tune/selection.cpp, Simple from 768 KiB
  if (runtime_shape)
    out << text::format("# scheduler %s, shaped as the GPU runtime's Simple path: %d thread blocks per connection, "
                        "micro-batches of one 512 KiB staging slot per block; nccl-tests conventions (size in bytes, "
                        "%s elements)\n",
                        spec.scheduler.c_str(), kRuntimeInstances, spec.dtype.c_str());
  else
    out << text::format("# scheduler %s, compiler-derived thread blocks per connection, micro-batch %s, nccl-tests "
                        "conventions (size in bytes, %s elements)\n",
                        spec.scheduler.c_str(), text::format_bytes(SimOptions{}.microbatch_bytes).c_str(), spec.dtype.c_str());
  if (spec.dtype_bytes == 0) fail(ErrorCode::InvalidArgument, "element type " + spec.dtype + " has no size");
  if (spec.csv) *spec.csv << "algorithm,collective,bytes,count,type,time_us,algbw_GBps,busbw_GBps,tbs_per_rank\n";
  int done = 0;
  for (const std::string& name : algos) {
    std::vector<SimReport> reports;
    uint64_t too_small = 0;
    try {
      const PlanSource src = load_source(name, topo);
      const Collective collective = src.algorithm ? src.algorithm->collective : src.given->collective;
      if (!spec.collectives.empty() &&
          std::find(spec.collectives.begin(), spec.collectives.end(), collective) == spec.collectives.end())
        continue;
      // As `weft simulate`: a wrong algorithm is never simulated (load_source verified it).
      // A plan file runs as it is; an algorithm is compiled as the GPU runtime compiles it.
      BuildOptions bo;
      bo.compile.scheduler = spec.scheduler;
      bo.compile.max_memory_bytes = spec.max_memory_bytes;
      if (runtime_shape) bo.compile.instances = kRuntimeInstances;
      bo.runtime_rule = runtime_shape;
      const BuiltPlan b = build_plan(src, topo, bo);
      Simulator sim(b.plan(), topo, true, spec.max_memory_bytes);
      const uint64_t chunks = static_cast<uint64_t>(std::max(b.plan().input_chunks, b.plan().output_chunks));
      for (uint64_t bytes : sizes) {
        if (bytes < chunks) {
          too_small = bytes;
          continue;
        }
        SimOptions o;
        o.bytes = bytes;
        o.runtime_microbatch = runtime_shape;
        reports.push_back(sim.run(o));
      }
    } catch (const Error& e) {
      // A built-in written for another shape (a root, a node count) is skipped, not fatal.
      if (!spec.algorithms.empty()) throw;
      out << "# skipped " << name << ": " << e.what() << "\n";
      continue;
    }
    ++done;
    if (spec.csv)
      for (const SimReport& r : reports)
        *spec.csv << name << ',' << to_string(r.collective) << ',' << r.bytes << ',' << r.bytes / spec.dtype_bytes << ','
                  << spec.dtype << ',' << r.time_us << ',' << r.algbw_GBps << ',' << r.busbw_GBps << ','
                  << r.tbs_per_rank_max << '\n';
    if (spec.json) {
      for (const SimReport& r : reports) out << report_to_json(r) << "\n";
      continue;
    }
    out << text::format("#\n# %s (%s, %d ranks)\n", name.c_str(),
                        reports.empty() ? "" : std::string(to_string(reports[0].collective)).c_str(), topo.num_gpus());
    if (too_small) out << text::format("# sizes up to %llu bytes left out: fewer bytes than chunk slots\n", static_cast<unsigned long long>(too_small));
    text::Table t({"size", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "TBs/rank"});
    for (const SimReport& r : reports)
      t.add_row({std::to_string(r.bytes), std::to_string(r.bytes / spec.dtype_bytes), spec.dtype, text::format("%.1f", r.time_us),
                 text::format("%.2f", r.algbw_GBps), text::format("%.2f", r.busbw_GBps), std::to_string(r.tbs_per_rank_max)});
    out << t.str();
  }
  if (spec.algorithms.empty() && topo.nodes == 1) print_oneshot_rows(spec, topo, sizes, out);
  return done;
}

}  // namespace weft::sim
