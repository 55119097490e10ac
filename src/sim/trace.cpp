#include "sim/trace.hpp"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/program.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

namespace {

std::string span_name(const Program& p, int32_t slot) {
  const ProgSlot& s = p.slots[static_cast<size_t>(slot)];
  const int32_t rank = p.tbs[static_cast<size_t>(s.tb)].rank;
  std::string name(to_string(s.prim));
  if (s.recv_conn >= 0) name += text::format(" %d<-%d", rank, p.conns[static_cast<size_t>(s.recv_conn)].src);
  if (s.send_conn >= 0) name += text::format(" %d->%d", rank, p.conns[static_cast<size_t>(s.send_conn)].dst);
  return name;
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Simulator& sim, const SimReport& r) {
  const Program& p = sim.program();
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() -> std::ostream& {
    if (!first) out << ",\n";
    first = false;
    return out;
  };
  // Names of the tracks that appear.
  std::set<int32_t> ranks, tbs;
  for (int32_t t : r.trace_tb) tbs.insert(t);
  for (int32_t t : tbs) ranks.insert(p.tbs[static_cast<size_t>(t)].rank);
  for (int32_t rank : ranks)
    sep() << text::format("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", rank, rank);
  for (int32_t t : tbs) {
    const ProgTb& tb = p.tbs[static_cast<size_t>(t)];
    sep() << text::format("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"tb %d\"}}", tb.rank, tb.local,
                          tb.local);
  }
  for (size_t i = 0; i < r.trace.size(); ++i) {
    const TraceSpan& s = r.trace[i];
    const ProgTb& tb = p.tbs[static_cast<size_t>(r.trace_tb[i])];
    const ProgSlot& ps = p.slots[static_cast<size_t>(s.slot)];
    sep() << text::format("{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.4f,\"dur\":%.4f,\"pid\":%d,\"tid\":%d,%s"
                          "\"args\":{\"slot\":%d,\"microbatch\":%d}}",
                          s.wait ? "wait" : span_name(p, s.slot).c_str(), s.wait ? "idle" : "busy", s.start_us, s.end_us - s.start_us,
                          tb.rank, tb.local, s.wait ? "\"cname\":\"grey\"," : "", ps.local, s.microbatch);
  }
  out << "\n],\"otherData\":";
  nlohmann::ordered_json other;
  other["algorithm"] = r.algorithm;
  other["topology"] = r.topology;
  other["scheduler"] = r.scheduler;
  other["bytes"] = r.bytes;
  other["time_us"] = r.time_us;
  other["busbw_GBps"] = r.busbw_GBps;
  other["truncated"] = r.trace_truncated;
  out << other.dump() << "}\n";
}

void write_chrome_trace_file(const std::string& path, const Simulator& sim, const SimReport& report) {
  std::ofstream f(path);
  if (!f) fail(ErrorCode::System, "cannot write the trace to '" + path + "'");
  write_chrome_trace(f, sim, report);
  f.close();
  if (!f) fail(ErrorCode::System, "writing the trace to '" + path + "' failed");
}

}  // namespace weft::sim
