// weft's Python extension, weft._weft: the chunk DSL (lang/chunk_dsl.hpp) with each call's
// Python file and line, algorithms and their files, topologies, the plan builder
// (plan/builder.hpp), the simulator (sim/) and the exports (plan JSON, MSCCL XML). The package
// beside it (python/weft) gives it GC3's surface (weft.language) and the pipeline
// (weft.compile, weft.simulate); docs/python.md describes both.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "compile/deadlock.hpp"
#include "compile/verify.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/algorithm_file.hpp"
#include "lang/chunk_dsl.hpp"
#include "lang/msccl_export.hpp"
#include "lang/python_frontend.hpp"
#include "plan/builder.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "sim/sweep.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace py = pybind11;
using namespace weft;

namespace {

// ---- Where a call was made: the innermost Python frame outside weft's own package. ----

struct Frames {
  std::string package_dir;                 ///< weft's package folder (its frames are skipped)
  std::unordered_set<std::string> files;   ///< interned file names (CallSite keeps pointers)
  PyObject* last = nullptr;                ///< the last filename object seen (a strong reference)
  const char* last_name = "";
  bool last_internal = false;

  void remember(PyObject* filename) {
    const char* utf8 = PyUnicode_AsUTF8(filename);
    std::string name = utf8 ? utf8 : "<python>";
    last_internal = !package_dir.empty() && name.rfind(package_dir, 0) == 0;
    last_name = files.insert(std::move(name)).first->c_str();
    Py_XDECREF(last);
    Py_INCREF(filename);
    last = filename;
  }
};

Frames& frames() {
  static Frames* f = new Frames();  // never freed: CallSites point into it
  return *f;
}

dsl::CallSite here() {
  Frames& fr = frames();
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  PyFrameObject* owned = nullptr;
  dsl::CallSite site{"<python>", 0, 0};
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    if (code->co_filename != fr.last) fr.remember(code->co_filename);
    const bool internal = fr.last_internal;
    if (!internal) {
      site.file = fr.last_name;
#if PY_VERSION_HEX >= 0x030B0000
      // One walk of the line table for line and column (PyFrame_GetLineNumber walks it too).
      int line = 0, col = 0, end_line = 0, end_col = 0;
      if (PyCode_Addr2Location(code, PyFrame_GetLasti(f), &line, &col, &end_line, &end_col) && line > 0) {
        site.line = static_cast<unsigned>(line);
        site.column = col >= 0 ? static_cast<unsigned>(col + 1) : 0;
      } else {
        site.line = static_cast<unsigned>(PyFrame_GetLineNumber(f));
      }
#else
      site.line = static_cast<unsigned>(PyFrame_GetLineNumber(f));
#endif
    }
    Py_DECREF(code);
    if (!internal) break;
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_XDECREF(owned);
    owned = back;
    f = back;
  }
  Py_XDECREF(owned);
  return site;
}

// ---- Programs and references. ----

using ProgramPtr = std::shared_ptr<dsl::Program>;

/// A chunk reference that keeps its program alive.
struct Ref {
  ProgramPtr program;
  dsl::ChunkRef ref;
};

std::vector<ProgramPtr>& current_programs() {
  static std::vector<ProgramPtr> stack;
  return stack;
}

const ProgramPtr& current_program(const dsl::CallSite& where, const char* what) {
  auto& stack = current_programs();
  if (stack.empty())
    fail(ErrorCode::InvalidUsage, std::string(where.file) + ":" + std::to_string(where.line) + ": " + what +
                                      " outside a program: call it inside `with MSCCLProgram(...)` (weft.language)");
  return stack.back();
}

Buffer buffer_of(const py::handle& b, const Ref* same) {
  if (b.is_none()) {
    if (same) return same->ref.buffer();
    fail(ErrorCode::InvalidArgument, "a buffer is needed (Buffer.input, Buffer.output or Buffer.scratch)");
  }
  if (py::isinstance<Buffer>(b)) return b.cast<Buffer>();
  if (py::isinstance<py::str>(b)) {
    const std::string s = b.cast<std::string>();
    if (s == "i" || s == "input") return Buffer::Input;
    if (s == "o" || s == "output") return Buffer::Output;
    if (s == "s" || s == "scratch") return Buffer::Scratch;
    fail(ErrorCode::InvalidArgument, "buffer '" + s +
                                         "' is not one of weft's (input, output, scratch; named scratch buffers are "
                                         "one scratch buffer in weft, docs/python.md)");
  }
  fail(ErrorCode::InvalidArgument, "a buffer is Buffer.input, Buffer.output or Buffer.scratch, not " +
                                       std::string(py::str(b.get_type().attr("__name__"))));
}

Ref make_ref(const ProgramPtr& p, dsl::ChunkRef r) { return Ref{p, std::move(r)}; }

std::string ref_repr(const Ref& r) {
  return "<chunk " + std::string(to_string(r.ref.buffer())) + "[" + std::to_string(r.ref.index()) +
         (r.ref.count() > 1 ? ":" + std::to_string(r.ref.index() + r.ref.count()) : "") + "] of rank " +
         std::to_string(r.ref.rank()) + ">";
}

// ---- The pipeline. ----

/// For the length of one compile or simulation, glibc's malloc keeps freed memory for the next
/// phase as the weft command does (util/huge_pages.cpp: blocks up to 32 MiB from the heap,
/// trimmed only past 1 GiB free; a third of the system time at 1,024 GPUs otherwise); after
/// it, the thresholds go back to glibc's defaults (128 KiB each).
struct MallocTuning {
#if defined(__linux__) && defined(__GLIBC__)
  MallocTuning() {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  ~MallocTuning() {
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
  }
#endif
};

struct PyPlan {
  BuiltPlan built;
};

CompileOptions compile_options(const py::dict& o) {
  CompileOptions c;
  c.keep_graph = false;
  for (auto [k, v] : o) {
    const std::string key = py::str(k);
    if (v.is_none()) continue;
    if (key == "scheduler") c.scheduler = v.cast<std::string>();
    else if (key == "allocator") c.allocator = v.cast<std::string>();
    else if (key == "instances") c.instances = v.cast<int32_t>();
    else if (key == "max_tbs") c.max_tbs = v.cast<int32_t>();
    else if (key == "in_place") c.in_place = v.cast<bool>();
    else if (key == "fuse") c.fuse = v.cast<bool>();
    else if (key == "aggregate") c.aggregate = v.cast<bool>();
    else if (key == "protocol") c.protocol = v.cast<std::string>();
    else if (key == "fifo_depth") c.fifo_depth = v.cast<int32_t>();
    else if (key == "memory_budget") c.max_memory_bytes = v.cast<uint64_t>();
    else fail(ErrorCode::InvalidArgument, "compile() takes no option '" + key + "'");
  }
  if (c.instances < 0 || c.instances > 64)
    fail(ErrorCode::InvalidArgument, "instances must be in [0, 64] (0: derived from the topology), not " +
                                         std::to_string(c.instances));
  return c;
}

PyPlan compile_algorithm(const Algorithm& algo, const Topology& topo, bool verify, bool runtime_rule,
                         const py::dict& options) {
  BuildOptions bo;
  bo.compile = compile_options(options);
  bo.runtime_rule = runtime_rule;
  check_build_options(bo);
  py::gil_scoped_release release;
  MallocTuning tuning;
  PlanSource src;
  src.kind = SourceKind::Python;
  src.name = algo.name;
  src.algorithm = algo;
  if (verify) {
    auto t0 = std::chrono::steady_clock::now();
    verify_or_throw(algo);
    src.verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    src.verified = true;
  }
  return PyPlan{build_plan(src, topo, bo)};
}

PyPlan compile_source(const std::string& source, const Topology& topo, const std::map<std::string, std::string>& params,
                      bool verify, bool runtime_rule, const py::dict& options) {
  BuildOptions bo;
  bo.compile = compile_options(options);
  bo.runtime_rule = runtime_rule;
  SourceOptions so;
  so.params = params;
  so.verify = verify;
  so.as_given_only = bo.compile.scheduler == "as-given";
  py::gil_scoped_release release;
  MallocTuning tuning;
  return PyPlan{build_plan(source, topo, so, bo)};
}

/// plan_summary_json's keys and weft compile --json's compiler figures, as a JSON text.
std::string plan_summary(const PyPlan& p) {
  const CompileResult& r = p.built.result;
  const Plan& plan = r.plan;
  nlohmann::json d = plan_summary_json(plan);
  d["protocol"] = plan.protocol;
  d["tasks"] = r.tasks;
  d["slots"] = r.slots;
  d["compiled"] = p.built.compiled;
  d["fused_primitives"] = r.fused_primitives;
  d["aggregated_tasks"] = r.aggregated_tasks;
  d["instances"] = {{"nvlink", r.instances_intra}, {"network", r.instances_inter}, {"local", r.instances_local}};
  d["seconds"] = {{"parse", r.seconds.parse},       {"verify", r.seconds.verify}, {"analyse", r.seconds.analyse},
                  {"schedule", r.seconds.schedule}, {"lower", r.seconds.lower},   {"total", r.seconds.total}};
  return d.dump();
}

/// Per size, the report as `weft simulate --json` prints it and as its table row.
std::vector<std::pair<std::string, std::vector<std::string>>> simulate_plan(const Plan& plan, const Topology& topo, const std::vector<uint64_t>& sizes,
                                       const std::string& microbatch, int32_t fifo_depth, uint64_t memory_budget) {
  sim::SimOptions o;
  if (microbatch == "runtime") o.runtime_microbatch = true;
  else o.microbatch_bytes = text::parse_bytes(microbatch);
  o.fifo_depth = fifo_depth;
  if (sizes.empty()) fail(ErrorCode::InvalidArgument, "simulate() needs at least one size");
  py::gil_scoped_release release;
  MallocTuning tuning;
  sim::Simulator simulator(plan, topo, true, memory_budget);
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (uint64_t bytes : sizes) {
    o.bytes = bytes;
    const sim::SimReport r = simulator.run(o);
    out.emplace_back(sim::report_to_json(r), sim::report_table_row(r));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_weft, m) {
  m.doc() = "weft's C++ core: chunk DSL, algorithms, topologies, plan builder, simulator (docs/python.md)";

  // weft::Error -> weft.Error (a RuntimeError) with .code, the ErrorCode's name.
  static py::exception<weft::Error> error(m, "Error", PyExc_RuntimeError);
  error.attr("__module__") = "weft";
  error.attr("code") = "InvalidArgument";  // what errors raised by weft's Python code are
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const weft::Error& e) {
      py::object exc = py::handle(error.ptr())(e.what());
      exc.attr("code") = std::string(error_code_identifier(e.code()));
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });

  py::enum_<Buffer>(m, "Buffer")
      .value("input", Buffer::Input)
      .value("output", Buffer::Output)
      .value("scratch", Buffer::Scratch);

  m.def("_set_package_dir", [](const std::string& dir) { frames().package_dir = dir; });
  m.def("_here", [] {
    dsl::CallSite w = here();
    return py::make_tuple(std::string(w.file), w.line, w.column);
  });

  py::class_<Algorithm>(m, "Algorithm")
      .def_readonly("name", &Algorithm::name)
      .def_property_readonly("collective", [](const Algorithm& a) { return std::string(to_string(a.collective)); })
      .def_readonly("ranks", &Algorithm::ranks)
      .def_readonly("input_chunks", &Algorithm::input_chunks)
      .def_readonly("output_chunks", &Algorithm::output_chunks)
      .def_readonly("scratch_chunks", &Algorithm::scratch_chunks)
      .def_readonly("in_place", &Algorithm::in_place)
      .def_readonly("root", &Algorithm::root)
      .def_readonly("channels", &Algorithm::channels)
      .def_readonly("gpus_per_node", &Algorithm::gpus_per_node)
      .def_readonly("protocol", &Algorithm::protocol)
      .def_readonly("source_file", &Algorithm::source_file)
      .def_property_readonly("num_steps", &Algorithm::num_steps)
      .def("__len__", [](const Algorithm& a) { return a.transfers.size(); })
      .def("transfers", [](const Algorithm& a) {
        py::list l;
        for (const Transfer& t : a.transfers)
          l.append(py::make_tuple(t.src_rank, std::string(to_string(t.src_buffer)), t.src_index, t.dst_rank,
                                  std::string(to_string(t.dst_buffer)), t.dst_index, t.count,
                                  std::string(to_string(t.op)), t.step));
        return l;
      }, "Every transfer as (src_rank, src_buffer, src_index, dst_rank, dst_buffer, dst_index, count, op, step)")
      .def("location", [](const Algorithm& a, size_t i) { return a.location_of(i); })
      .def("save", &save_algorithm_file, py::arg("path"))
      .def("same_transfers", [](const Algorithm& a, const Algorithm& b) { return a.transfers == b.transfers; })
      .def("__repr__", [](const Algorithm& a) {
        return "<Algorithm " + a.name + ": " + std::string(to_string(a.collective)) + " on " + std::to_string(a.ranks) +
               " ranks, " + std::to_string(a.transfers.size()) + " transfers, " + std::to_string(a.num_steps()) + " steps>";
      });
  m.def("load_algorithm_file", &load_algorithm_file, py::arg("path"));

  py::class_<dsl::Program, ProgramPtr>(m, "Program")
      .def(py::init([](const std::string& name, const std::string& collective, int32_t ranks, int32_t input_chunks,
                       int32_t output_chunks, bool in_place, int32_t root, int32_t scratch_chunks, int32_t channels,
                       int32_t gpus_per_node, int32_t nics_per_node, const std::string& protocol) {
             dsl::CallSite where = here();
             auto c = collective_from_string(collective);
             if (!c)
               fail(ErrorCode::InvalidArgument, std::string(where.file) + ":" + std::to_string(where.line) +
                                                    ": unknown collective '" + collective + "'");
             dsl::ProgramSpec s{.name = name, .collective = *c, .ranks = ranks, .input_chunks = input_chunks,
                                .output_chunks = output_chunks, .in_place = in_place, .root = root,
                                .scratch_chunks = scratch_chunks, .channels = channels, .warps = 16,
                                .gpus_per_node = gpus_per_node, .nics_per_node = nics_per_node, .protocol = protocol};
             return std::make_shared<dsl::Program>(s, where);
           }),
           py::arg("name"), py::arg("collective"), py::arg("ranks"), py::arg("input_chunks"),
           py::arg("output_chunks") = -1, py::arg("in_place") = true, py::arg("root") = 0,
           py::arg("scratch_chunks") = -1, py::arg("channels") = 1, py::arg("gpus_per_node") = 0,
           py::arg("nics_per_node") = 0, py::arg("protocol") = "")
      .def("chunk", [](const ProgramPtr& p, int32_t rank, py::handle buffer, int32_t index, int32_t size) {
             dsl::CallSite w = here();
             return make_ref(p, p->chunk(rank, buffer_of(buffer, nullptr), index, size, w));
           }, py::arg("rank"), py::arg("buffer"), py::arg("index"), py::arg("size") = 1)
      .def("expect", [](const ProgramPtr& p, int32_t rank, int32_t index, std::vector<std::pair<int32_t, int32_t>> c) {
             p->expect(rank, index, std::move(c));
           }, py::arg("rank"), py::arg("index"), py::arg("contributions"))
      .def("algorithm", &dsl::Program::algorithm)
      .def_property_readonly("num_transfers", [](const dsl::Program& p) { return p.transfer_channels().size(); })
      .def_property_readonly("transfer_channels", &dsl::Program::transfer_channels)
      .def_property_readonly("ranks", [](const dsl::Program& p) { return p.spec().ranks; })
      .def_property_readonly("name", [](const dsl::Program& p) { return p.spec().name; });

  m.def("_push", [](const ProgramPtr& p) { current_programs().push_back(p); });
  m.def("_pop", [] {
    if (!current_programs().empty()) current_programs().pop_back();
  });
  m.def("chunk", [](int32_t rank, py::handle buffer, int32_t index, int32_t size) {
        dsl::CallSite w = here();
        const ProgramPtr& p = current_program(w, "chunk()");
        return make_ref(p, p->chunk(rank, buffer_of(buffer, nullptr), index, size, w));
      }, py::arg("rank"), py::arg("buffer"), py::arg("index"), py::arg("size") = 1,
      "A reference to `size` chunks of `buffer` on `rank`, from index `index`, in the current program");

  py::class_<Ref>(m, "Ref")
      .def_property_readonly("rank", [](const Ref& r) { return r.ref.rank(); })
      .def_property_readonly("buffer", [](const Ref& r) { return r.ref.buffer(); })
      .def_property_readonly("index", [](const Ref& r) { return r.ref.index(); })
      .def_property_readonly("size", [](const Ref& r) { return r.ref.count(); })
      .def("copy", [](const Ref& r, int32_t dst, py::handle buffer, int32_t index, int32_t, int32_t, int32_t ch) {
             dsl::CallSite w = here();
             Buffer b = buffer_of(buffer, &r);
             return make_ref(r.program, r.ref.copy(dst, b, index < 0 ? r.ref.index() : index, ch, w));
           }, py::arg("dst"), py::arg("buffer") = py::none(), py::arg("index") = -1, py::arg("sendtb") = -1,
           py::arg("recvtb") = -1, py::arg("ch") = -1,
           "Copies these chunks to `dst` (same buffer and index unless given) and returns the copy's reference")
      .def("reduce", [](const Ref& r, const Ref& other, int32_t, int32_t, int32_t ch) {
             dsl::CallSite w = here();
             return make_ref(r.program, r.ref.reduce(other.ref, ch, w));
           }, py::arg("other"), py::arg("sendtb") = -1, py::arg("recvtb") = -1, py::arg("ch") = -1,
           "self := self + other; returns the new reference to self's chunks (self becomes stale)")
      .def("split", [](const Ref& r, int32_t parts) {
             std::vector<Ref> out;
             for (dsl::ChunkRef& c : r.ref.split(parts)) out.push_back(make_ref(r.program, std::move(c)));
             return out;
           }, py::arg("num"))
      .def("group", [](const Ref& r, const Ref& other) { return make_ref(r.program, r.ref.group(other.ref, here())); },
           py::arg("other"))
      .def("__repr__", &ref_repr);

  py::class_<VerifyResult>(m, "VerifyResult")
      .def_readonly("ok", &VerifyResult::ok)
      .def_readonly("errors", &VerifyResult::errors)
      .def_readonly("error_count", &VerifyResult::error_count)
      .def("__bool__", [](const VerifyResult& v) { return v.ok; });
  m.def("verify", [](const Algorithm& a) {
    py::gil_scoped_release release;
    return verify(a);
  }, py::arg("algorithm"));

  py::class_<Topology>(m, "Topology")
      .def_readonly("name", &Topology::name)
      .def_readonly("nodes", &Topology::nodes)
      .def_readonly("gpus_per_node", &Topology::gpus_per_node)
      .def_readonly("nics_per_node", &Topology::nics_per_node)
      .def_property_readonly("num_gpus", &Topology::num_gpus)
      .def("to_json", &topology_to_json)
      .def("__repr__", [](const Topology& t) {
        return "<Topology " + t.name + ": " + std::to_string(t.nodes) + " x " + std::to_string(t.gpus_per_node) + " GPUs>";
      });
  m.def("load_topology", &load_topology, py::arg("spec"), "A preset name (h200-1x8, a100-128x8, ...) or a JSON file");
  m.def("topology_from_json", &topology_from_json, py::arg("text"), py::arg("origin") = "<python>");
  m.def("topology_presets", &topology_preset_names);

  m.def("load", [](const std::string& source, const Topology& topo, const std::map<std::string, std::string>& params,
                   bool verify) {
    SourceOptions so;
    so.params = params;
    so.verify = verify;
    py::gil_scoped_release release;
    PlanSource s = load_source(source, topo, so);
    if (!s.algorithm) fail(ErrorCode::InvalidArgument, source + " is a plan file: it holds no algorithm");
    return *s.algorithm;
  }, py::arg("source"), py::arg("topology"), py::arg("params") = std::map<std::string, std::string>{},
        py::arg("verify") = true);

  py::class_<PyPlan>(m, "Plan")
      .def("_summary", &plan_summary)
      .def("to_json", [](const PyPlan& p) { return plan_to_json(p.built.plan()); })
      .def("save", [](const PyPlan& p, const std::string& path) { save_plan(p.built.plan(), path); }, py::arg("path"))
      .def("to_msccl_xml", [](const PyPlan& p, const std::string& name) {
             MscclExportOptions o;
             o.name = name;
             return export_msccl(p.built.plan(), o);
           }, py::arg("name") = "")
      .def("check_deadlock", [](const PyPlan& p, int32_t fifo_depth) {
             DeadlockReport r = check_deadlock(p.built.plan(), fifo_depth);
             return py::make_tuple(r.ok, r.message);
           }, py::arg("fifo_depth") = kDefaultFifoDepth);
  m.def("load_plan", [](const std::string& path) {
    PyPlan p;
    p.built.kind = SourceKind::PlanFile;
    p.built.result.plan = load_plan(path);
    return p;
  }, py::arg("path"));

  m.def("_compile_algorithm", &compile_algorithm);
  m.def("_compile_source", &compile_source);
  m.def("_simulate", [](const PyPlan& p, const Topology& topo, const std::vector<uint64_t>& sizes,
                        const std::string& microbatch, int32_t fifo_depth, uint64_t budget) {
    return simulate_plan(p.built.plan(), topo, sizes, microbatch, fifo_depth, budget);
  });
  m.def("parse_bytes", &text::parse_bytes, py::arg("text"));
  m.def("parse_size_range", &sim::parse_size_range, py::arg("range"));
  m.def("_report_table", [](const std::vector<std::vector<std::string>>& rows) {
    text::Table t(sim::report_table_header());
    for (const auto& row : rows) t.add_row(row);
    return t.str();
  });
}
