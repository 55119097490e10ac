#include "sim/sweep.hpp"

#include <algorithm>
#include <chrono>

#include "compile/compiler.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_import.hpp"
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

std::map<std::string, std::string> params_for_topology(const Topology& topo, std::map<std::string, std::string> params) {
  params.try_emplace("nRanks", std::to_string(topo.num_gpus()));
  params.try_emplace("GPUPerNode", std::to_string(topo.gpus_per_node));
  if (topo.nics_per_node > 0) params.try_emplace("NICPerNode", std::to_string(topo.nics_per_node));
  return params;
}

void run_sweep(const SweepSpec& spec, const SweepCallback& on_report) {
  const Algorithm algo = load_algorithm(spec.algorithm, params_for_topology(spec.topology, spec.params));
  // What the verifier refuses is never compiled nor simulated: a wrong algorithm has no
  // meaningful time (an XML file's as-given schedule moves the same transfers).
  verify_or_throw(algo);
  for (const std::string& sched : spec.schedulers) {
    if (sched == "as-given") {
      // An MSCCL XML file's own schedule, the baseline weft's are measured against
      // (docs/msccl-xml.md); "compile time" is the import's.
      if (!is_msccl_xml_path(spec.algorithm))
        fail(ErrorCode::InvalidArgument, "scheduler as-given runs an MSCCL XML file's own schedule; '" + spec.algorithm +
                                             "' is not an .xml file");
      auto t0 = std::chrono::steady_clock::now();
      Plan plan = import_msccl_file(spec.algorithm,
                                    msccl_options_from_params(params_for_topology(spec.topology, spec.params), spec.algorithm))
                      .as_given;
      plan.topology = spec.topology.name;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Simulator sim(plan, spec.topology, !spec.options.trace, spec.max_memory_bytes);
      for (uint64_t bytes : spec.sizes) {
        SimOptions o = spec.options;
        o.bytes = bytes;
        on_report(sim, sim.run(o), secs);
      }
      continue;
    }
    CompileOptions co;
    co.scheduler = sched;
    co.allocator = spec.allocator;
    co.instances = spec.instances;
    co.max_tbs = spec.max_tbs;
    co.in_place = spec.in_place;
    co.max_memory_bytes = spec.max_memory_bytes;
    auto t0 = std::chrono::steady_clock::now();
    CompileResult cr = compile(algo, spec.topology, co);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A traced run keeps instance siblings apart (merging is exact, but the trace then has
    // one track per thread block of the plan).
    Simulator sim(cr.plan, spec.topology, !spec.options.trace, spec.max_memory_bytes);
    for (uint64_t bytes : spec.sizes) {
      SimOptions o = spec.options;
      o.bytes = bytes;
      on_report(sim, sim.run(o), secs);
    }
  }
}

int run_simulated_bench(const BenchSpec& spec, std::ostream& out) {
  const Topology topo = load_topology(spec.topology);
  const std::vector<uint64_t> sizes = spec.sizes.empty() ? parse_size_range("1M:1G") : spec.sizes;
  const std::vector<std::string> algos = spec.algorithms.empty() ? builtin_algorithm_names() : spec.algorithms;
  out << text::format("# weft bench: no GPU in use; every figure below is SIMULATED on topology %s (%d GPUs), "
                      "not measured (cost model: docs/cost-model.md)\n",
                      topo.name.c_str(), topo.num_gpus());
  const bool runtime_shape = spec.runtime_shape && topo.nodes == 1;
  constexpr int32_t kRuntimeInstances = 24;  // src/runtime/selection.cpp, Simple from 768 KiB
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
      const Algorithm algo = load_algorithm(name, params_for_topology(topo, {}));
      if (!spec.collectives.empty() &&
          std::find(spec.collectives.begin(), spec.collectives.end(), algo.collective) == spec.collectives.end())
        continue;
      verify_or_throw(algo);  // as `weft simulate`: a wrong algorithm is never simulated
      CompileOptions co;
      co.scheduler = spec.scheduler;
      co.max_memory_bytes = spec.max_memory_bytes;
      if (runtime_shape) co.instances = kRuntimeInstances;
      Simulator sim((runtime_shape ? compile_for_runtime(algo, topo, co) : compile(algo, topo, co)).plan, topo, true,
                    spec.max_memory_bytes);
      const uint64_t chunks = static_cast<uint64_t>(std::max(algo.input_chunks, algo.output_chunks));
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
  return done;
}

}  // namespace weft::sim
