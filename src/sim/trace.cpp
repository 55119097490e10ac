#include "sim/trace.hpp"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/program.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

std::string span_label(Primitive prim, int32_t rank, int32_t from, int32_t to) {
  std::string name(to_string(prim));
  if (from >= 0) name += text::format(" %d<-%d", rank, from);
  if (to >= 0) name += text::format(" %d->%d", rank, to);
  return name;
}

void write_chrome_trace(std::ostream& out, const SimReport& r, const TraceLabels& labels) {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() -> std::ostream& {
    if (!first) out << ",\n";
    first = false;
    return out;
  };
  // Names of the tracks that appear.
  std::set<int32_t> ranks;
  std::set<std::pair<int32_t, int32_t>> tracks;
  for (int32_t t : r.trace_tb) tracks.insert(labels.track(t));
  for (const auto& [rank, tb] : tracks) ranks.insert(rank);
  for (int32_t rank : ranks)
    sep() << text::format("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", rank, rank);
  for (const auto& [rank, tb] : tracks)
    sep() << text::format("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"tb %d\"}}", rank, tb, tb);
  for (size_t i = 0; i < r.trace.size(); ++i) {
    const TraceSpan& s = r.trace[i];
    const auto [rank, tb] = labels.track(r.trace_tb[i]);
    sep() << text::format("{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.4f,\"dur\":%.4f,\"pid\":%d,\"tid\":%d,%s"
                          "\"args\":{\"slot\":%d,\"microbatch\":%d}}",
                          s.wait ? "wait" : labels.name(s.slot).c_str(), s.wait ? "idle" : "busy", s.start_us, s.end_us - s.start_us,
                          rank, tb, s.wait ? "\"cname\":\"grey\"," : "", labels.local_slot(s.slot), s.microbatch);
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
  for (const auto& [k, v] : labels.other.items()) other[k] = v;
  out << other.dump() << "}\n";
}

void write_chrome_trace_file(const std::string& path, const SimReport& r, const TraceLabels& labels) {
  std::ofstream f(path);
  if (!f) fail(ErrorCode::System, "cannot write the trace to '" + path + "'");
  write_chrome_trace(f, r, labels);
  f.close();
  if (!f) fail(ErrorCode::System, "writing the trace to '" + path + "' failed");
}

namespace {

TraceLabels program_labels(const Program& p) {
  TraceLabels labels;
  labels.track = [&p](int32_t t) {
    const ProgTb& tb = p.tbs[static_cast<size_t>(t)];
    return std::pair<int32_t, int32_t>(tb.rank, tb.local);
  };
  labels.name = [&p](int32_t slot) {
    const ProgSlot& s = p.slots[static_cast<size_t>(slot)];
    const int32_t rank = p.tbs[static_cast<size_t>(s.tb)].rank;
    return span_label(s.prim, rank, s.recv_conn >= 0 ? p.conns[static_cast<size_t>(s.recv_conn)].src : -1,
                      s.send_conn >= 0 ? p.conns[static_cast<size_t>(s.send_conn)].dst : -1);
  };
  labels.local_slot = [&p](int32_t slot) { return p.slots[static_cast<size_t>(slot)].local; };
  return labels;
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Simulator& sim, const SimReport& r) {
  write_chrome_trace(out, r, program_labels(sim.program()));
}

void write_chrome_trace_file(const std::string& path, const Simulator& sim, const SimReport& report) {
  write_chrome_trace_file(path, report, program_labels(sim.program()));
}

}  // namespace weft::sim
