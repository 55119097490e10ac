#include "sim/measured_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

namespace {

using json = nlohmann::ordered_json;

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

std::vector<MeasuredBlock> blocks_from_trace_buffer(const char* buf, uint64_t bytes, uint32_t cap) {
  const uint64_t region = exec::trace_region_bytes(cap);
  if (cap == 0 || bytes % region != 0)
    fail(ErrorCode::InvalidArgument, text::format("a trace buffer of %llu bytes is not whole regions of %u records",
                                                  static_cast<unsigned long long>(bytes), cap));
  std::vector<MeasuredBlock> out;
  for (uint64_t b = 0; b < bytes / region; ++b) {
    exec::TraceBlockHeader h;
    std::memcpy(&h, buf + b * region, sizeof(h));
    // A block with no slot returns before writing its header: it reads back as zeros.
    if (h.cap != 0 && h.cap != cap)
      fail(ErrorCode::InvalidArgument, text::format("block %llu's trace header holds %u records, the buffer %u",
                                                    static_cast<unsigned long long>(b), h.cap, cap));
    MeasuredBlock m;
    m.start_ns = h.start_ns;
    m.end_ns = h.end_ns;
    m.count = h.count;
    m.cap = cap;
    const char* recs = buf + b * region + sizeof(exec::TraceBlockHeader);
    m.records.resize(std::min(h.count, cap));
    if (!m.records.empty()) std::memcpy(m.records.data(), recs, m.records.size() * sizeof(exec::TraceRecord));
    out.push_back(std::move(m));
  }
  return out;
}

std::string measured_rank_to_json(const MeasuredRank& r) {
  json j;
  j["format"] = "weft-measured-trace";
  j["version"] = 1;
  j["rank"] = r.rank;
  j["nranks"] = r.nranks;
  j["kernel"] = r.kernel;
  j["note"] = r.note;
  j["collective"] = r.collective;
  j["algorithm"] = r.algorithm;
  j["protocol"] = r.protocol;
  j["bytes"] = r.bytes;
  j["microbatches"] = r.microbatches;
  j["fifo_depth"] = r.fifo_depth;
  json slots = json::array();
  for (const MeasuredSlot& s : r.slots)
    slots.push_back({s.tb, s.local, static_cast<int>(s.prim), s.send_peer, s.send_conn, s.recv_peer, s.recv_conn});
  j["slots"] = std::move(slots);
  json blocks = json::array();
  for (const MeasuredBlock& b : r.blocks) {
    json jb;
    jb["start_ns"] = b.start_ns;
    jb["end_ns"] = b.end_ns;
    jb["count"] = b.count;
    jb["cap"] = b.cap;
    json recs = json::array();
    for (const exec::TraceRecord& x : b.records)
      recs.push_back({x.slot, x.mb, x.wait_ns, x.deps_ns, x.move_ns, x.end_ns, x.rpos, x.spos});
    jb["records"] = std::move(recs);
    blocks.push_back(std::move(jb));
  }
  j["blocks"] = std::move(blocks);
  return j.dump();
}

MeasuredRank measured_rank_from_json(const std::string& text, const std::string& where) {
  MeasuredRank r;
  try {
    const json j = json::parse(text);
    if (j.value("format", "") != "weft-measured-trace")
      fail(ErrorCode::Parse, where + ": not a weft measured trace (its \"format\" is not \"weft-measured-trace\")");
    r.rank = j.at("rank").get<int32_t>();
    r.nranks = j.at("nranks").get<int32_t>();
    r.kernel = j.at("kernel").get<std::string>();
    r.note = j.value("note", "");
    r.collective = j.at("collective").get<std::string>();
    r.algorithm = j.value("algorithm", "");
    r.protocol = j.value("protocol", "");
    r.bytes = j.at("bytes").get<uint64_t>();
    r.microbatches = j.value("microbatches", 0u);
    r.fifo_depth = j.value("fifo_depth", 0);
    for (const json& s : j.at("slots")) {
      MeasuredSlot m;
      m.tb = s.at(0).get<int32_t>();
      m.local = s.at(1).get<int32_t>();
      const int p = s.at(2).get<int>();
      if (p < 0 || p > static_cast<int>(Primitive::Nop))
        fail(ErrorCode::Parse, where + text::format(": slot %zu has primitive code %d", r.slots.size(), p));
      m.prim = static_cast<Primitive>(p);
      m.send_peer = s.at(3).get<int32_t>();
      m.send_conn = s.at(4).get<int32_t>();
      m.recv_peer = s.at(5).get<int32_t>();
      m.recv_conn = s.at(6).get<int32_t>();
      r.slots.push_back(m);
    }
    for (const json& jb : j.at("blocks")) {
      MeasuredBlock b;
      b.start_ns = jb.at("start_ns").get<uint64_t>();
      b.end_ns = jb.at("end_ns").get<uint64_t>();
      b.count = jb.at("count").get<uint32_t>();
      b.cap = jb.at("cap").get<uint32_t>();
      for (const json& x : jb.at("records")) {
        exec::TraceRecord rec{};
        rec.slot = x.at(0).get<int32_t>();
        rec.mb = x.at(1).get<uint32_t>();
        rec.wait_ns = x.at(2).get<uint64_t>();
        rec.deps_ns = x.at(3).get<uint64_t>();
        rec.move_ns = x.at(4).get<uint64_t>();
        rec.end_ns = x.at(5).get<uint64_t>();
        rec.rpos = x.at(6).get<uint32_t>();
        rec.spos = x.at(7).get<uint32_t>();
        if (rec.slot < 0 || static_cast<size_t>(rec.slot) >= r.slots.size())
          fail(ErrorCode::Parse, where + text::format(": block %zu has a record of slot %d, outside the %zu slots",
                                                      r.blocks.size(), rec.slot, r.slots.size()));
        b.records.push_back(rec);
      }
      r.blocks.push_back(std::move(b));
    }
  } catch (const json::exception& e) {
    fail(ErrorCode::Parse, where + ": malformed measured trace (" + e.what() + ")");
  }
  return r;
}

namespace {

// A rank's readings relative to its earliest block start, in ns (doubles near 1e18 would
// lose the nanoseconds).
struct RelClock {
  uint64_t ref = 0;
  double operator()(uint64_t t) const {
    return t >= ref ? static_cast<double>(t - ref) : -static_cast<double>(ref - t);
  }
};

RelClock rank_clock(const MeasuredRank& r) {
  RelClock c;
  c.ref = std::numeric_limits<uint64_t>::max();
  for (const MeasuredBlock& b : r.blocks)
    if (!b.records.empty()) c.ref = std::min(c.ref, b.start_ns);
  if (c.ref == std::numeric_limits<uint64_t>::max()) c.ref = 0;
  return c;
}

// One end of a message: (src, dst, connection, position).
using MsgKey = std::tuple<int32_t, int32_t, int32_t, uint32_t>;
struct MsgEnd {
  double move = 0, end = 0;
};

}  // namespace

ClockAlignment align_clocks(const std::vector<MeasuredRank>& ranks) {
  const size_t R = ranks.size();
  ClockAlignment out;
  out.offset_ns.assign(R, 0.0);
  out.uncertainty_ns.assign(R, -1.0);
  out.how.assign(R, "launch");
  if (R == 0) return out;
  std::vector<RelClock> clk;
  for (const MeasuredRank& r : ranks) clk.push_back(rank_clock(r));
  // Every end of every message, on its own rank's clock.
  std::map<MsgKey, MsgEnd> sends, recvs;
  for (size_t q = 0; q < R; ++q) {
    const MeasuredRank& r = ranks[q];
    for (const MeasuredBlock& b : r.blocks)
      for (const exec::TraceRecord& x : b.records) {
        const MeasuredSlot& s = r.slots[static_cast<size_t>(x.slot)];
        const MsgEnd e{clk[q](x.move_ns), clk[q](x.end_ns)};
        if (s.send_peer >= 0) sends[{r.rank, s.send_peer, s.send_conn, x.spos}] = e;
        if (s.recv_peer >= 0) recvs[{s.recv_peer, r.rank, s.recv_conn, x.rpos}] = e;
      }
  }
  // lo[a][b] <= o_b - o_a <= hi[a][b]
  std::vector<std::vector<double>> lo(R, std::vector<double>(R, -kInf)), hi(R, std::vector<double>(R, kInf));
  auto bound = [&](size_t a, size_t b, double l, double h) {  // l <= o_b - o_a <= h
    lo[a][b] = std::max(lo[a][b], l);
    hi[a][b] = std::min(hi[a][b], h);
    lo[b][a] = std::max(lo[b][a], -h);
    hi[b][a] = std::min(hi[b][a], -l);
  };
  for (const auto& [key, rv] : recvs) {
    const auto [src, dst, conn, pos] = key;
    if (src < 0 || dst < 0 || static_cast<size_t>(src) >= R || static_cast<size_t>(dst) >= R || src == dst) continue;
    const size_t a = static_cast<size_t>(src), b = static_cast<size_t>(dst);
    auto sv = sends.find(key);
    if (sv != sends.end()) {
      ++out.messages;
      // The receiver finishes after the sender started moving; Simple: it starts moving
      // only after the sender's post, which follows the sender's end reading.
      double l = sv->second.move - rv.end;
      if (ranks[b].protocol != "LL") l = std::max(l, sv->second.end - rv.move);
      bound(a, b, l, kInf);
    }
    // Message pos + depth's sender waited for this message's ack, after rv.end.
    const int32_t depth = ranks[a].fifo_depth;
    if (depth > 0) {
      auto later = sends.find({src, dst, conn, pos + static_cast<uint32_t>(depth)});
      if (later != sends.end()) bound(a, b, -kInf, later->second.move - rv.end);
    }
  }
  // Offsets along a breadth-first tree from rank 0.
  std::vector<bool> seen(R, false);
  seen[0] = true;
  out.how[0] = "rank 0";
  out.uncertainty_ns[0] = 0;
  std::deque<size_t> todo{0};
  while (!todo.empty()) {
    const size_t a = todo.front();
    todo.pop_front();
    for (size_t b = 0; b < R; ++b) {
      if (seen[b] || (lo[a][b] == -kInf && hi[a][b] == kInf)) continue;
      double d;
      if (lo[a][b] > -kInf && hi[a][b] < kInf) {
        if (lo[a][b] > hi[a][b]) out.consistent = false;
        d = (lo[a][b] + hi[a][b]) / 2;
        out.how[b] = "messages";
        out.uncertainty_ns[b] = std::abs(hi[a][b] - lo[a][b]) / 2 + (out.uncertainty_ns[a] > 0 ? out.uncertainty_ns[a] : 0);
      } else {
        d = lo[a][b] > -kInf ? lo[a][b] : hi[a][b];
        out.how[b] = "one-sided";
      }
      out.offset_ns[b] = out.offset_ns[a] + d;
      seen[b] = true;
      todo.push_back(b);
    }
  }
  // Ranks with no message to the others: launches taken as simultaneous (offset 0 on the
  // relative clocks, whose zero is each rank's first block start).
  // The offsets above are on the relative clocks; add each rank's reference back.
  for (size_t q = 0; q < R; ++q) {
    const double ref_diff = clk[q].ref >= clk[0].ref ? static_cast<double>(clk[q].ref - clk[0].ref)
                                                     : -static_cast<double>(clk[0].ref - clk[q].ref);
    // true_q (on rank 0's clock, relative to rank 0's ref) = rel_q + offset; in absolute
    // readings: abs_q - ref_q + offset = abs_q + (offset - ref_diff) - ref_0.
    out.offset_ns[q] -= ref_diff;
  }
  return out;
}

namespace {

/// Every rank's records are of one call of the interpreter, in rank order.
void check_ranks(const std::vector<MeasuredRank>& ranks) {
  const int32_t R = static_cast<int32_t>(ranks.size());
  for (int32_t q = 0; q < R; ++q) {
    const MeasuredRank& r = ranks[static_cast<size_t>(q)];
    if (r.rank != q) fail(ErrorCode::InvalidArgument, text::format("measured trace %d is rank %d's", q, r.rank));
    if (r.nranks != R)
      fail(ErrorCode::InvalidArgument, text::format("rank %d's trace is of %d ranks, %d were gathered", q, r.nranks, R));
    if (r.kernel != "interpreter")
      fail(ErrorCode::InvalidArgument, text::format("rank %d recorded nothing: the call ran %s%s%s", q, r.kernel.c_str(),
                                                    r.note.empty() ? "" : ": ", r.note.c_str()));
    if (r.collective != ranks[0].collective || r.bytes != ranks[0].bytes)
      fail(ErrorCode::InvalidArgument, text::format("rank %d traced %s of %llu bytes, rank 0 %s of %llu", q,
                                                    r.collective.c_str(), static_cast<unsigned long long>(r.bytes),
                                                    ranks[0].collective.c_str(), static_cast<unsigned long long>(ranks[0].bytes)));
  }
}

/// The run's summary for the trace file: dropped records, idle figures, clocks, blocks.
void add_summary(MeasuredRun& run, int32_t R) {
  const SimReport& rep = run.report;
  json& o = run.labels.other;
  o["measured"] = true;
  o["dropped_records"] = run.dropped;
  o["tb_idle_mean"] = rep.tb_idle_mean;
  o["tb_idle_max"] = rep.tb_idle_max;
  o["tb_sync_idle_mean"] = rep.tb_sync_idle_mean;
  json clocks = json::array();
  for (int32_t q = 0; q < R; ++q)
    clocks.push_back({{"rank", q},
                      {"offset_us", run.clocks.offset_ns[static_cast<size_t>(q)] * 1e-3},
                      {"uncertainty_us", run.clocks.uncertainty_ns[static_cast<size_t>(q)] < 0
                                             ? json(nullptr)
                                             : json(run.clocks.uncertainty_ns[static_cast<size_t>(q)] * 1e-3)},
                      {"how", run.clocks.how[static_cast<size_t>(q)]}});
  o["clocks"] = std::move(clocks);
  o["clocks_consistent"] = run.clocks.consistent;
  json tbs = json::array();
  for (const TbStat& t : rep.tbs)
    tbs.push_back({{"rank", t.rank}, {"tb", t.tb}, {"busy_us", t.busy_us}, {"lifetime_us", t.lifetime_us},
                   {"idle", t.idle()}, {"sync_idle", t.sync_idle()}, {"invocations", t.invocations}});
  o["tbs"] = std::move(tbs);
}

}  // namespace

MeasuredRun measured_run(const std::vector<MeasuredRank>& ranks, size_t trace_limit) {
  if (ranks.empty()) fail(ErrorCode::InvalidArgument, "a measured trace needs at least one rank's records");
  check_ranks(ranks);
  const int32_t R = static_cast<int32_t>(ranks.size());
  MeasuredRun run;
  run.clocks = align_clocks(ranks);
  // Aligned time in us from the first block's start, on rank 0's clock. Readings near 1e18
  // ns lose their nanoseconds as doubles: each rank's are taken relative to its own first
  // block start in integers, then shifted by the (small) offset between the ranks.
  std::vector<uint64_t> ref(static_cast<size_t>(R), 0);
  std::vector<double> shift(static_cast<size_t>(R), 0);
  for (int32_t q = 0; q < R; ++q) {
    const size_t i = static_cast<size_t>(q);
    ref[i] = rank_clock(ranks[i]).ref;
    const double ref_diff = ref[i] >= ref[0] ? static_cast<double>(ref[i] - ref[0]) : -static_cast<double>(ref[0] - ref[i]);
    shift[i] = run.clocks.offset_ns[i] + ref_diff;  // rank q's relative reading + shift = rank 0's relative clock
  }
  auto rel = [&](int32_t q, uint64_t t) {
    const uint64_t r0 = ref[static_cast<size_t>(q)];
    return (t >= r0 ? static_cast<double>(t - r0) : -static_cast<double>(r0 - t)) + shift[static_cast<size_t>(q)];
  };
  double t0 = kInf;
  for (int32_t q = 0; q < R; ++q)
    for (const MeasuredBlock& b : ranks[static_cast<size_t>(q)].blocks)
      if (!b.records.empty()) t0 = std::min(t0, rel(q, b.start_ns));
  auto at = [&](int32_t q, uint64_t t) { return (rel(q, t) - t0) * 1e-3; };

  SimReport& rep = run.report;
  const MeasuredRank& r0 = ranks[0];
  rep.algorithm = r0.algorithm + (r0.protocol.empty() ? "" : "/" + r0.protocol);
  rep.topology = "measured";
  rep.execution = "measured";
  rep.collective = collective_from_string(r0.collective).value_or(Collective::Custom);
  rep.ranks = R;
  rep.bytes = r0.bytes;
  rep.microbatches = static_cast<int32_t>(r0.microbatches);
  rep.fifo_depth = r0.fifo_depth;

  // Global numbering of slots and blocks, for the labels.
  struct Names {
    std::vector<std::pair<int32_t, int32_t>> tracks;  // (rank, block)
    std::vector<std::string> names;                   // per global slot
    std::vector<int32_t> locals;
  };
  auto names = std::make_shared<Names>();
  std::vector<int32_t> slot_base(static_cast<size_t>(R), 0);
  for (int32_t q = 0; q < R; ++q) {
    const MeasuredRank& r = ranks[static_cast<size_t>(q)];
    slot_base[static_cast<size_t>(q)] = static_cast<int32_t>(names->names.size());
    for (const MeasuredSlot& s : r.slots) {
      names->names.push_back(span_label(s.prim, q, s.recv_peer, s.send_peer));
      names->locals.push_back(s.local);
    }
  }
  double end_all = 0;
  for (int32_t q = 0; q < R; ++q) {
    const MeasuredRank& r = ranks[static_cast<size_t>(q)];
    int32_t used = 0;
    for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
      const MeasuredBlock& b = r.blocks[bi];
      if (b.records.empty()) continue;
      ++used;
      ++run.blocks;
      run.dropped += b.dropped();
      const int32_t track = static_cast<int32_t>(names->tracks.size());
      names->tracks.emplace_back(q, static_cast<int32_t>(bi));
      const double start = at(q, b.start_ns);
      const double last = at(q, b.records.back().end_ns);
      const double end = b.dropped() == 0 && b.end_ns != 0 ? std::max(last, at(q, b.end_ns)) : last;
      double waits = 0, dep_waits = 0;
      for (const exec::TraceRecord& x : b.records) {
        const double w = at(q, x.wait_ns), d = at(q, x.deps_ns), m = at(q, x.move_ns), e = at(q, x.end_ns);
        waits += std::max(0.0, m - w);
        dep_waits += std::max(0.0, d - w);
        if (rep.trace.size() + 2 > trace_limit) {
          rep.trace_truncated = true;
          continue;
        }
        const int32_t gslot = slot_base[static_cast<size_t>(q)] + x.slot;
        if (m > w) {
          rep.trace.push_back(TraceSpan{gslot, static_cast<int32_t>(x.mb), w, m, true});
          rep.trace_tb.push_back(track);
        }
        rep.trace.push_back(TraceSpan{gslot, static_cast<int32_t>(x.mb), m, e, false});
        rep.trace_tb.push_back(track);
      }
      TbStat st;
      st.rank = q;
      st.tb = static_cast<int32_t>(bi);
      st.lifetime_us = std::max(0.0, end - start);
      st.busy_us = std::max(0.0, st.lifetime_us - waits);
      st.in_primitive_us = std::max(0.0, st.lifetime_us - dep_waits);
      st.invocations = static_cast<int64_t>(b.records.size());
      rep.invocations += st.invocations;
      rep.tbs.push_back(st);
      end_all = std::max(end_all, end);
    }
    rep.tbs_per_rank_max = std::max(rep.tbs_per_rank_max, used);
  }
  rep.simulated_invocations = rep.invocations;
  rep.tbs_per_rank_mean = static_cast<double>(run.blocks) / R;
  rep.time_us = end_all;  // t0 is the first block's start
  if (rep.time_us > 0) {
    rep.algbw_GBps = static_cast<double>(rep.bytes) / rep.time_us / 1e3;
    rep.busbw_GBps = rep.algbw_GBps * bus_factor(rep.collective, R);
  }
  summarize_tbs(rep);

  run.labels.track = [names](int32_t t) { return names->tracks[static_cast<size_t>(t)]; };
  run.labels.name = [names](int32_t s) { return names->names[static_cast<size_t>(s)]; };
  run.labels.local_slot = [names](int32_t s) { return names->locals[static_cast<size_t>(s)]; };
  add_summary(run, R);
  return run;
}

}  // namespace weft::sim
