#include "cli/bench_gpu.hpp"
#include "cli/bench_calls.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_predict.hpp"
#include "ir/algorithm.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "util/launcher.hpp"
#include "tune/decide.hpp"
#include "tune/net_selection.hpp"
#include "runtime/trace_api.h"
#include "sim/measured_trace.hpp"
#include "sim/svg_plot.hpp"
#include "sim/trace.hpp"
#include "util/config.hpp"
#include "util/driver_entry.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#include "weft/weft.h"

namespace weft::cli {

// --- NCCL through dlopen: the few entry points the bench needs, NCCL's ABI. ---------------
struct NcclId {
  char internal[128];
};
using ncclComm_t = void*;
struct Nccl {
  void* lib = nullptr;
  int version = 0;
  int (*GetVersion)(int*) = nullptr;
  int (*GetUniqueId)(NcclId*) = nullptr;
  int (*CommInitRank)(ncclComm_t*, int, NcclId, int) = nullptr;
  int (*CommDestroy)(ncclComm_t) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*AllGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*AlltoAll)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;

  bool load() {
    lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    auto sym = [&](auto& f, const char* name) { f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name)); };
    sym(GetVersion, "ncclGetVersion");
    sym(GetUniqueId, "ncclGetUniqueId");
    sym(CommInitRank, "ncclCommInitRank");
    sym(CommDestroy, "ncclCommDestroy");
    sym(AllReduce, "ncclAllReduce");
    sym(AllGather, "ncclAllGather");
    sym(ReduceScatter, "ncclReduceScatter");
    sym(Broadcast, "ncclBroadcast");
    sym(Reduce, "ncclReduce");
    sym(AlltoAll, "ncclAlltoAll");
    sym(GetErrorString, "ncclGetErrorString");
    if (!GetUniqueId || !CommInitRank || !AllReduce || !AllGather || !ReduceScatter || !Broadcast || !Reduce) return false;
    if (GetVersion) GetVersion(&version);
    return true;
  }
};

namespace {

struct Row {
  std::string collective;
  uint64_t bytes = 0, count = 0;
  double us[2] = {0, 0}, algbw[2] = {0, 0}, busbw[2] = {0, 0};
  long wrong[2] = {-1, -1};
  int tbs[2] = {0, 0};
  bool have[2] = {false, false};
  std::string plan;  ///< what weft ran (plan_name)
  double sim_us = -1;  ///< the simulator's prediction (BenchPredictor), < 0: none
  /// (sim - weft) / weft, in percent; nan without both.
  double sim_err() const { return have[0] && sim_us >= 0 && us[0] > 0 ? 100.0 * (sim_us - us[0]) / us[0] : std::nan(""); }
};

Collective parse_coll(const std::string& s) {
  auto c = collective_from_string(s);
  if (!c || *c == Collective::Custom) {
    std::fprintf(stderr, "weft bench: unknown collective '%s'\n", s.c_str());
    std::exit(2);
  }
  return *c;
}

int parse_dtype(const std::string& s) {
  for (int t = 0; t < weftNumTypes; ++t)
    if (s == host::dtype_name(t)) return t;
  std::fprintf(stderr, "weft bench: unknown type '%s'\n", s.c_str());
  std::exit(2);
}

int parse_op(const std::string& s) {
  for (int o = 0; o < weftNumOps; ++o)
    if (s == host::op_name(o)) return o;
  std::fprintf(stderr, "weft bench: unknown op '%s'\n", s.c_str());
  std::exit(2);
}

}  // namespace

/// Elements per rank's call for a row of `bytes` (nccl-tests' convention).
uint64_t count_for(Collective c, uint64_t bytes, size_t esz, int R) {
  switch (c) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll: return bytes / esz / static_cast<uint64_t>(R);
    default: return bytes / esz;
  }
}

namespace {

/// What weft's communicator runs for `payload` bytes per rank (the larger buffer), out of
/// place, by the runtime's decision (tune/decide.hpp: WEFT_SELECTION's table or the default,
/// then WEFT_ALGO / WEFT_PROTO / WEFT_INSTANCES ...); the bench's ranks share one host, so
/// they span nodes only under WEFT_EMULATE_NODES, where the communicator takes the
/// multi-node table (Communicator::make_decider). "x4" is the decision's instances; a
/// compiled plan the runtime has to fit within 72 thread blocks takes the compiler's own
/// (the TBs column shows what ran).
std::string plan_name(Collective c, uint64_t payload, int R) {
  try {
    const int64_t emulate = config::get_int("WEFT_EMULATE_NODES");
    const bool multi_node = emulate >= 2 && R >= emulate;
    static const auto one_node = selection_table_for_environment();
    static std::map<int, std::unique_ptr<Decider>> deciders;  // by rank count
    auto& d = deciders[R];
    if (!d) {
      CommShape shape = CommShape::from_environment(R);
      shape.multi_node = multi_node;
      d = std::make_unique<Decider>(multi_node ? multi_node_table_for_environment() : one_node, shape,
                                    DecideEnv::from_environment());
    }
    return describe(d->decide(Call{c, payload, false}));
  } catch (const Error& e) {
    return std::string("? (") + e.what() + ")";
  }
}

/// `s` as one CSV field: quoted, quotes doubled.
std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

double bus_factor(Collective c, int R) {
  switch (c) {
    case Collective::AllReduce: return 2.0 * (R - 1) / R;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll: return static_cast<double>(R - 1) / R;
    default: return 1.0;
  }
}

}  // namespace

int issue(RankCtx& x, Lib lib, Collective c, uint64_t count) {
  const int t = x.dtype, op = x.op;
  if (lib == Lib::Weft) {
    auto s = reinterpret_cast<weftStream_t>(x.st);
    auto wt = static_cast<weftDataType_t>(t);
    auto wo = static_cast<weftRedOp_t>(op);
    switch (c) {
      case Collective::AllReduce: return weftAllReduce(x.send, x.recv, count, wt, wo, x.weft, s);
      case Collective::AllGather: return weftAllGather(x.send, x.recv, count, wt, x.weft, s);
      case Collective::ReduceScatter: return weftReduceScatter(x.send, x.recv, count, wt, wo, x.weft, s);
      case Collective::Broadcast: return weftBroadcast(x.send, x.recv, count, wt, 0, x.weft, s);
      case Collective::Reduce: return weftReduce(x.send, x.recv, count, wt, wo, 0, x.weft, s);
      case Collective::AllToAll: return weftAllToAll(x.send, x.recv, count, wt, x.weft, s);
      default: return 1;
    }
  }
  Nccl& n = *x.lib;
  switch (c) {
    case Collective::AllReduce: return n.AllReduce(x.send, x.recv, count, t, op, x.nccl, x.st);
    case Collective::AllGather: return n.AllGather(x.send, x.recv, count, t, x.nccl, x.st);
    case Collective::ReduceScatter: return n.ReduceScatter(x.send, x.recv, count, t, op, x.nccl, x.st);
    case Collective::Broadcast: return n.Broadcast(x.send, x.recv, count, t, 0, x.nccl, x.st);
    case Collective::Reduce: return n.Reduce(x.send, x.recv, count, t, op, 0, x.nccl, x.st);
    case Collective::AllToAll: return n.AlltoAll ? n.AlltoAll(x.send, x.recv, count, t, x.nccl, x.st) : 1;
    default: return 1;
  }
}

/// Thread blocks one call launches: captured into a graph, kernel nodes' grid sizes summed.
static int count_tbs(RankCtx& x, Lib lib, Collective c, uint64_t count) {
  cudaGraph_t g = nullptr;
  if (cudaStreamBeginCapture(x.st, cudaStreamCaptureModeRelaxed) != cudaSuccess) return -1;
  int rc = issue(x, lib, c, count);
  if (cudaStreamEndCapture(x.st, &g) != cudaSuccess || rc != 0 || g == nullptr) {
    cudaGetLastError();
    return -1;
  }
  size_t n = 0;
  cudaGraphGetNodes(g, nullptr, &n);
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) cudaGraphGetNodes(g, nodes.data(), &n);
  int tbs = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess) {
      tbs += static_cast<int>(p.gridDim.x * p.gridDim.y * p.gridDim.z);
      continue;
    }
    cudaGetLastError();
    // Kernels launched through the driver API (NCCL's) answer the driver's query only.
    using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
    static const GetParams get = driver_entry<GetParams>("cuGraphKernelNodeGetParams");
    CUDA_KERNEL_NODE_PARAMS kp{};
    if (get != nullptr && get(reinterpret_cast<CUgraphNode>(node), &kp) == CUDA_SUCCESS)
      tbs += static_cast<int>(kp.gridDimX * kp.gridDimY * kp.gridDimZ);
  }
  cudaGraphDestroy(g);
  return tbs;
}

/// Mean microseconds per call over `iters` calls after `warmup` (or one replay of a graph
/// of `iters` calls); negative on failure.
double time_calls(RankCtx& x, Lib lib, Collective c, uint64_t count, const BenchOptions& o) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  double us = -1;
  auto wait = [&] { return gputest::sync_bounded(reinterpret_cast<weftStream_t>(x.st), 300); };
  do {
    bool ok = true;
    for (int i = 0; i < o.warmup && ok; ++i) ok = issue(x, lib, c, count) == 0;
    if (!ok || !wait()) break;
    if (o.graph) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      if (cudaStreamBeginCapture(x.st, cudaStreamCaptureModeRelaxed) != cudaSuccess) break;
      for (int i = 0; i < o.iters && ok; ++i) ok = issue(x, lib, c, count) == 0;
      if (cudaStreamEndCapture(x.st, &g) != cudaSuccess || !ok) break;
      if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) break;
      cudaGraphLaunch(ge, x.st);
      if (!wait()) break;
      cudaEventRecord(a, x.st);
      cudaGraphLaunch(ge, x.st);
      cudaEventRecord(b, x.st);
      if (!wait()) break;
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    } else {
      cudaEventRecord(a, x.st);
      for (int i = 0; i < o.iters && ok; ++i) ok = issue(x, lib, c, count) == 0;
      cudaEventRecord(b, x.st);
      if (!ok || !wait()) break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    us = ms * 1000.0 / o.iters;
  } while (false);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return us;
}

/// Runs one call on random inputs and counts the wrong elements of this rank's output.
long check(RankCtx& x, Lib lib, Collective c, uint64_t count, uint64_t seed) {
  const size_t esz = host::dtype_size(x.dtype);
  const size_t ns = host::send_elems(c, count, x.R), nr = host::recv_elems(c, count, x.R);
  std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(x.R));
  for (int q = 0; q < x.R; ++q) {
    sends[static_cast<size_t>(q)].resize(ns * esz);
    host::fill_random(x.dtype, x.op, sends[static_cast<size_t>(q)].data(), ns, seed + static_cast<uint64_t>(q), 8);
  }
  std::vector<uint8_t> untouched(nr * esz, 0xFF);
  // On the timed stream: a pageable cudaMemcpy may return before its DMA lands.
  cudaMemcpyAsync(x.send, sends[static_cast<size_t>(x.rank)].data(), ns * esz, cudaMemcpyHostToDevice, x.st);
  cudaMemsetAsync(x.recv, 0xFF, nr * esz, x.st);
  if (issue(x, lib, c, count) != 0) return static_cast<long>(nr);
  if (!gputest::sync_bounded(reinterpret_cast<weftStream_t>(x.st), 300)) return static_cast<long>(nr);
  std::vector<uint8_t> got(nr * esz);
  cudaMemcpyAsync(got.data(), x.recv, got.size(), cudaMemcpyDeviceToHost, x.st);
  cudaStreamSynchronize(x.st);
  auto want = host::reference_for_rank(c, x.dtype, x.op, 0, count, x.rank, sends, untouched, 8);
  long wrong = 0;
  for (size_t i = 0; i < nr; ++i) wrong += std::memcmp(got.data() + i * esz, want.data() + i * esz, esz) != 0;
  return wrong;
}

namespace {

std::string fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

void print_header(const BenchOptions& o, Collective c, int R, const Nccl* nccl, const char* gpu) {
  std::printf("#\n# %s  %s %s  %d ranks  %s  %s  warmup %d, iters %d%s\n", std::string(to_string(c)).c_str(),
              o.dtype.c_str(), o.op.c_str(), R, gpu, nccl ? ("NCCL " + std::to_string(nccl->version)).c_str() : "no NCCL",
              o.warmup, o.iters, o.graph ? ", CUDA graph" : "");
  std::printf("#%11s %12s %8s | %10s %8s %8s %6s %4s | %10s %8s %8s %6s %4s | %9s %6s | %7s\n", "size(B)", "count", "type",
              "weft(us)", "algbw", "busbw", "#wrong", "TBs", "nccl(us)", "algbw", "busbw", "#wrong", "TBs", "sim(us)", "err",
              "speedup  weft plan");
}

void print_row(const Row& r, const std::string& type) {
  auto side = [&](int i) {
    if (!r.have[i]) return std::string("  ") + std::string(10, '-') + "        -        -      -    -";
    return fmt(r.us[i], "%10.2f") + fmt(r.algbw[i], " %8.2f") + fmt(r.busbw[i], " %8.2f") +
           fmt(static_cast<double>(r.wrong[i]), " %6.0f") + fmt(r.tbs[i], " %4.0f");
  };
  std::string speed = r.have[0] && r.have[1] && r.us[0] > 0 ? fmt(r.us[1] / r.us[0], "%7.2f") : "      -";
  const std::string sim = r.sim_us >= 0 ? fmt(r.sim_us, "%9.2f") : "        -";
  const std::string err = std::isnan(r.sim_err()) ? "     -" : fmt(r.sim_err(), "%+5.0f%%");
  std::printf(" %11llu %12llu %8s | %s | %s | %s %s | %s  %s\n", static_cast<unsigned long long>(r.bytes),
              static_cast<unsigned long long>(r.count), type.c_str(), side(0).c_str(), side(1).c_str(), sim.c_str(),
              err.c_str(), speed.c_str(), r.plan.c_str());
  std::fflush(stdout);
}

/// `path` with `tag` before its extension ("out.json", "AllReduce.1048576" ->
/// "out.AllReduce.1048576.json"), or with the extension replaced by `ext` when tag is empty.
std::string with_tag(const std::string& path, const std::string& tag, const std::string& ext = "") {
  const size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
  if (tag.empty()) return path.substr(0, dot) + ext;
  return path.substr(0, dot) + "." + tag + path.substr(dot);
}

/// One traced call of `c` (every rank), its records gathered on rank 0 through files next
/// to the trace (rank r writes `<trace>.rank<r>.part`; a one-element AllReduce after the
/// writes tells rank 0 that all are there), turned into the Chrome trace at `out` and a
/// summary line. Returns false when something failed (said on stderr).
bool trace_row(RankCtx& x, const BenchOptions& o, Collective c, uint64_t count, const Row& row, const std::string& out,
               BenchPredictor* pred) {
  const std::string part = o.trace + ".rank" + std::to_string(x.rank) + ".part";
  auto s = reinterpret_cast<weftStream_t>(x.st);
  std::string text;
  char* js = nullptr;
  // The call is issued whatever the arming did: every rank must take part.
  const bool armed = weftTraceArm(x.weft, o.trace_records) == weftSuccess;
  const bool ran = issue(x, Lib::Weft, c, count) == 0 && gputest::sync_bounded(s, 300);  // take's wait is not bounded
  if (armed && ran && weftTraceTake(x.weft, s, &js) == weftSuccess) {
    text = js;
  } else {
    sim::MeasuredRank failed;
    failed.rank = x.rank;
    failed.nranks = x.R;
    failed.kernel = "failed";
    failed.note = weftGetLastError(nullptr);
    failed.collective = std::string(to_string(c));
    text = sim::measured_rank_to_json(failed);
  }
  weftTraceFree(js);
  {
    std::ofstream f(part + ".tmp");
    f << text << '\n';
  }
  std::rename((part + ".tmp").c_str(), part.c_str());
  // Every rank has written its file once rank 0's AllReduce has completed.
  const bool met = weftAllReduce(x.send, x.recv, 1, weftFloat32, weftSum, x.weft, s) == weftSuccess &&
                   gputest::sync_bounded(s, 300);
  if (x.rank != 0) return met;
  bool ok = met;
  try {
    if (!met) fail(ErrorCode::Remote, "the ranks did not meet after the traced call");
    std::vector<sim::MeasuredRank> ranks;
    for (int q = 0; q < x.R; ++q) {
      const std::string path = o.trace + ".rank" + std::to_string(q) + ".part";
      std::ifstream f(path);
      std::string line;
      if (!std::getline(f, line)) fail(ErrorCode::System, "cannot read " + path);
      ranks.push_back(sim::measured_rank_from_json(line, path));
      unlink(path.c_str());
    }
    for (const sim::MeasuredRank& m : ranks)
      if (m.kernel == "failed") fail(ErrorCode::Remote, "rank " + std::to_string(m.rank) + "'s traced call failed: " + m.note);
    if (ranks[0].kernel != "interpreter") {
      std::printf("# trace %s %llu: nothing recorded: the call ran %s%s%s\n", row.collective.c_str(),
                  static_cast<unsigned long long>(row.bytes), ranks[0].kernel.c_str(), ranks[0].note.empty() ? "" : " (",
                  ranks[0].note.empty() ? "" : (ranks[0].note + ")").c_str());
      return true;
    }
    sim::MeasuredRun run = sim::measured_run(ranks);
    Prediction p = pred ? pred->predict(c, row.bytes, true) : Prediction{};
    if (p.report) {
      run.labels.other["simulated"] = nlohmann::ordered_json::parse(sim::report_to_json(*p.report));
      run.labels.other["simulated_time_us"] = p.us;
    }
    run.labels.other["untraced_us"] = row.us[0];
    sim::write_chrome_trace_file(out, run.report, run.labels);
    std::string clocks;
    for (int q = 1; q < x.R; ++q) {
      const double u = run.clocks.uncertainty_ns[static_cast<size_t>(q)];
      clocks += fmt(run.clocks.offset_ns[static_cast<size_t>(q)] * 1e-3, (" rank " + std::to_string(q) + " %+.1f us").c_str()) +
                (u >= 0 ? fmt(u * 1e-3, " +-%.2f") : std::string()) + " (" + run.clocks.how[static_cast<size_t>(q)] + ")";
    }
    const sim::SimReport& m = run.report;
    std::printf("# trace %s %llu -> %s: traced call %.1f us (untraced mean %.1f), %d blocks, tb-idle-avg %.1f%% max %.1f%%, "
                "sync-idle-avg %.1f%%; simulated %s; %llu records dropped; clocks:%s%s\n",
                row.collective.c_str(), static_cast<unsigned long long>(row.bytes), out.c_str(), m.time_us, row.us[0],
                run.blocks, 100 * m.tb_idle_mean, 100 * m.tb_idle_max, 100 * m.tb_sync_idle_mean,
                p.report ? fmt(100 * p.report->tb_idle_mean, "tb-idle-avg %.1f%%").append(fmt(100 * p.report->tb_idle_max, " max %.1f%%")).c_str()
                         : ("none (" + (p.why.empty() ? std::string("one-shot kernel") : p.why) + ")").c_str(),
                static_cast<unsigned long long>(run.dropped), clocks.empty() ? " one rank" : clocks.c_str(),
                run.clocks.consistent ? "" : " (bounds crossed: the clocks drift or a reading is late)");
    if (!o.json) {
      // The simulator's report row (weft simulate's table) for both; links are not measured.
      std::vector<std::string> head = sim::report_table_header();
      head.insert(head.begin(), "run");
      text::Table t(head);
      std::vector<std::string> mrow = sim::report_table_row(m);
      mrow[4] = "-";
      mrow.insert(mrow.begin(), "measured");
      t.add_row(mrow);
      if (p.report) {
        std::vector<std::string> srow = sim::report_table_row(*p.report);
        srow.insert(srow.begin(), "simulated");
        t.add_row(srow);
      }
      std::istringstream lines(t.str());
      for (std::string line; std::getline(lines, line);) std::printf("#   %s\n", line.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "weft bench: --trace %s %llu: %s\n", row.collective.c_str(),
                 static_cast<unsigned long long>(row.bytes), e.what());
    ok = false;
  }
  std::fflush(stdout);
  return ok;
}

/// NCCL's communicator beside weft's: rank 0 leaves NCCL's id in a file next to the others'
/// (same machine), they poll for it. False (said on stderr) when it fails.
bool join_nccl(Nccl& nccl, RankCtx& x, int rank, int R) {
  std::string path = "/tmp/weft-bench-" + std::to_string(getppid()) + ".ncclid";
  NcclId nid{};
  if (rank == 0) {
    if (nccl.GetUniqueId(&nid) != 0) return false;
    std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(nid.internal, sizeof(nid.internal));
    std::rename(tmp.c_str(), path.c_str());
  } else {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream f(path, std::ios::binary);
      if (f.read(nid.internal, sizeof(nid.internal))) break;
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  int rc = nccl.CommInitRank(&x.nccl, R, nid, rank);
  if (rank == 0) unlink(path.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, nccl.GetErrorString ? nccl.GetErrorString(rc) : "?");
    return false;
  }
  return true;
}

/// The stream and both buffers (max_bytes each, zeroed, registered as copy-engine
/// collectives need); false (said on stderr) when the buffers cannot be allocated.
bool setup_buffers(RankCtx& x, int rank, uint64_t max_bytes) {
  cudaStreamCreateWithFlags(&x.st, cudaStreamNonBlocking);
  if (cudaMalloc(reinterpret_cast<void**>(&x.send), max_bytes) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&x.recv), max_bytes) != cudaSuccess) {
    std::fprintf(stderr, "rank %d: cannot allocate 2 x %llu bytes\n", rank, static_cast<unsigned long long>(max_bytes));
    return false;
  }
  cudaMemset(x.send, 0, max_bytes);
  cudaMemset(x.recv, 0, max_bytes);
  // Registered, as copy-engine collectives (WEFT_ALGO=ce) need; every other path ignores it.
  void *reg_send = nullptr, *reg_recv = nullptr;
  if (weftCommRegister(x.weft, x.send, max_bytes, &reg_send) != weftSuccess ||
      weftCommRegister(x.weft, x.recv, max_bytes, &reg_recv) != weftSuccess)
    std::fprintf(stderr, "rank %d: weftCommRegister: %s\n", rank, weftGetLastError(nullptr));
  cudaDeviceSynchronize();
  return true;
}

/// How many rows --trace records: every size, or --trace-size only, for every collective.
int traced_row_count(const BenchOptions& o, int rank, int R) {
  int traced_rows = 0;
  for (uint64_t size : o.sizes) traced_rows += !o.trace.empty() && (o.trace_size == 0 || o.trace_size == size);
  traced_rows *= static_cast<int>(o.collectives.size());
  if (R == 1 && traced_rows > 0) {
    if (rank == 0) std::printf("# --trace: one rank runs a copy, no kernel of weft's: nothing to trace\n");
    traced_rows = 0;
  }
  return traced_rows;
}

/// Times (and checks) row r of collective c with weft and, where loaded, NCCL; false when
/// some call failed or computed a wrong element.
bool measure_row(RankCtx& x, const BenchOptions& o, Collective c, uint64_t count, uint64_t seed, Nccl* nccl, Row& r) {
  bool ok = true;
  for (Lib lib : {Lib::Weft, Lib::Nccl}) {
    int i = lib == Lib::Weft ? 0 : 1;
    if (lib == Lib::Nccl && nccl == nullptr) continue;
    if (lib == Lib::Nccl && c == Collective::AllToAll && !nccl->AlltoAll) continue;
    double us = time_calls(x, lib, c, count, o);
    if (us < 0) {
      std::fprintf(stderr, "rank %d: %s %s of %llu bytes failed: %s\n", x.rank, i == 0 ? "weft" : "NCCL",
                   r.collective.c_str(), static_cast<unsigned long long>(r.bytes), i == 0 ? weftGetLastError(nullptr) : "");
      ok = false;
      continue;
    }
    r.have[i] = true;
    r.us[i] = us;
    r.algbw[i] = static_cast<double>(r.bytes) / us / 1e3;
    r.busbw[i] = r.algbw[i] * bus_factor(c, x.R);
    r.tbs[i] = count_tbs(x, lib, c, count);
    r.wrong[i] = o.check ? check(x, lib, c, count, seed) : 0;
    if (r.wrong[i] != 0) ok = false;
  }
  return ok;
}

void print_json_row(const Row& r, const std::string& dtype) {
  std::printf("{\"collective\":\"%s\",\"bytes\":%llu,\"count\":%llu,\"type\":\"%s\",\"weft_us\":%.3f,\"weft_busbw\":%.3f,"
              "\"weft_wrong\":%ld,\"weft_tbs\":%d,\"nccl_us\":%.3f,\"nccl_busbw\":%.3f,\"nccl_wrong\":%ld,\"nccl_tbs\":%d,"
              "\"weft_plan\":%s,\"sim_us\":%s,\"sim_err_pct\":%s}\n",
              r.collective.c_str(), static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
              dtype.c_str(), r.us[0], r.busbw[0], r.wrong[0], r.tbs[0], r.us[1], r.busbw[1], r.wrong[1], r.tbs[1],
              nlohmann::json(r.plan).dump().c_str(), r.sim_us >= 0 ? fmt(r.sim_us, "%.3f").c_str() : "null",
              std::isnan(r.sim_err()) ? "null" : fmt(r.sim_err(), "%.1f").c_str());
}

/// Measured busbw beside the simulator's, one pair of lines per collective (--trace's .svg);
/// false (said on stderr) when it cannot be written.
bool write_plot(const BenchOptions& o, const std::vector<Row>& rows, int R) {
  std::vector<sim::PlotSeries> series;
  for (const Row& r : rows) {
    if (series.empty() || series[series.size() - 2].name != r.collective + " measured") {
      series.push_back({r.collective + " measured", {}});
      series.push_back({r.collective + " simulated", {}});
    }
    const double f = bus_factor(parse_coll(r.collective), R);
    if (r.have[0]) series[series.size() - 2].points.emplace_back(r.bytes, r.busbw[0]);
    if (r.sim_us > 0) series.back().points.emplace_back(r.bytes, static_cast<double>(r.bytes) / r.sim_us / 1e3 * f);
  }
  try {
    const std::string svg = with_tag(o.trace, "", ".svg");
    sim::write_busbw_plot(svg, series, "weft bench, measured and simulated (" + std::to_string(R) + " ranks)");
    if (!o.json) std::printf("# plot of measured and simulated busbw -> %s\n", svg.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "weft bench: %s\n", e.what());
    return false;
  }
  return true;
}

/// The rows as --csv; false (said on stderr) when the file cannot be written.
bool write_csv(const BenchOptions& o, const std::vector<Row>& rows) {
  std::ofstream f(o.csv);
  f << "collective,bytes,count,type,weft_us,weft_algbw,weft_busbw,weft_wrong,weft_tbs,nccl_us,nccl_algbw,nccl_busbw,nccl_wrong,nccl_tbs,weft_plan,"
       "sim_us,sim_err_pct\n";
  for (const Row& r : rows)
    f << r.collective << ',' << r.bytes << ',' << r.count << ',' << o.dtype << ',' << r.us[0] << ',' << r.algbw[0] << ','
      << r.busbw[0] << ',' << r.wrong[0] << ',' << r.tbs[0] << ',' << r.us[1] << ',' << r.algbw[1] << ',' << r.busbw[1]
      << ',' << r.wrong[1] << ',' << r.tbs[1] << ',' << csv_field(r.plan) << ','
      << (r.sim_us >= 0 ? fmt(r.sim_us, "%.3f") : std::string()) << ','
      << (std::isnan(r.sim_err()) ? std::string() : fmt(r.sim_err(), "%.1f")) << '\n';
  f.close();
  if (!f) {
    std::fprintf(stderr, "weft bench: writing the --csv file '%s' failed\n", o.csv.c_str());
    return false;
  }
  return true;
}

int bench_rank(const BenchOptions& o, int rank, int R, const weftUniqueId& id) {
  RankCtx x;
  x.rank = rank;
  x.R = R;
  x.dtype = parse_dtype(o.dtype);
  x.op = parse_op(o.op);
  if (weftCommInitRank(&x.weft, R, id, rank) != weftSuccess) {
    std::fprintf(stderr, "rank %d: weftCommInitRank: %s\n", rank, weftGetLastError(nullptr));
    return 1;
  }
  Nccl nccl;
  bool have_nccl = o.nccl && nccl.load();
  if (o.nccl && !have_nccl && rank == 0) std::printf("# libnccl.so.2 not found: weft only\n");
  if (have_nccl) {
    x.lib = &nccl;
    if (!join_nccl(nccl, x, rank, R)) return 1;
  }
  const size_t esz = host::dtype_size(x.dtype);
  if (!setup_buffers(x, rank, std::max<uint64_t>(o.to, 64) * 2)) return 1;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, rank);
  std::vector<Row> rows;
  int status = 0;
  std::unique_ptr<BenchPredictor> pred;
  if (rank == 0 && o.predict && R > 1) {
    pred = std::make_unique<BenchPredictor>(R, o.graph, o.sim_topology);
    if (!o.json)
      std::printf("# sim(us): the simulator's time for the same plan on %s%s, launch included; err = sim / weft - 1 "
                  "(docs/traces.md)\n",
                  pred->topology_name().c_str(), pred->error().empty() ? "" : (" (none: " + pred->error() + ")").c_str());
  }
  // Traced rows: every size, or --trace-size only; several get the size in the file name.
  const int traced_rows = traced_row_count(o, rank, R);
  for (const std::string& name : o.collectives) {
    Collective c = parse_coll(name);
    if (rank == 0 && !o.json) print_header(o, c, R, have_nccl ? &nccl : nullptr, prop.name);
    for (uint64_t size : o.sizes) {
      const double b = static_cast<double>(size);
      Row r;
      r.collective = std::string(to_string(c));
      uint64_t count = count_for(c, static_cast<uint64_t>(b), esz, R);
      if (count == 0) continue;
      r.count = count;
      r.bytes = static_cast<uint64_t>(host::recv_elems(c, count, R) > host::send_elems(c, count, R)
                                          ? host::recv_elems(c, count, R)
                                          : host::send_elems(c, count, R)) * esz;
      if (rank == 0 && R > 1) r.plan = plan_name(c, r.bytes, R);
      if (rank == 0 && R == 1) r.plan = "copy (one rank)";
      if (!measure_row(x, o, c, count, static_cast<uint64_t>(b) * 7 + 11, have_nccl ? &nccl : nullptr, r)) status = 1;
      if (pred) r.sim_us = pred->predict(c, r.bytes).us;
      if (rank == 0) {
        if (o.json) print_json_row(r, o.dtype);
        else print_row(r, o.dtype);
      }
      if (traced_rows > 0 && (o.trace_size == 0 || o.trace_size == r.bytes) && r.have[0]) {
        const std::string out = traced_rows > 1 ? with_tag(o.trace, r.collective + "." + std::to_string(r.bytes)) : o.trace;
        if (!trace_row(x, o, c, count, r, out, pred.get())) status = 1;
      }
      rows.push_back(r);
    }
  }
  if (rank == 0 && !o.trace.empty() && !write_plot(o, rows, R)) status = 2;
  if (rank == 0 && !o.csv.empty() && !write_csv(o, rows)) status = 2;
  cudaFree(x.send);
  cudaFree(x.recv);
  if (x.nccl) nccl.CommDestroy(x.nccl);
  weftCommDestroy(x.weft);
  return status;
}

}  // namespace

int bench_gpu(const BenchOptions& o) {
  int ndev = gputest::probe_device_count();
  if (ndev == 0) return gputest::kSkip;
  int R = o.ranks > 0 ? o.ranks : ndev;
  return gputest::run_ranks(R, [&](int rank, const weftUniqueId& id) { return bench_rank(o, rank, R, id); }, 3600,
                            "weft bench");
}

}  // namespace weft::cli
