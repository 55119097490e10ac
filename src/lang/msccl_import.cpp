#include "lang/msccl_import.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <tuple>

#include "lang/msccl_import_graph.hpp"
#include "lang/msccl_program.hpp"
#include "lang/xml_reader.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

using msccl_detail::StepGraph;
using msccl_detail::StepNode;

namespace {

[[noreturn]] void fail_attr(const xml::Document& doc, const xml::Element* e, std::string_view attr,
                            const std::string& sentence) {
  fail_at_attribute(doc, e, attr, sentence);
}

// The algorithm's header: collective, ranks, chunk counts per buffer, layout and hints.
Algorithm make_header(const xml::Document& doc, const MscclProgram& p, const MscclImportOptions& options) {
  Algorithm a;
  a.name = p.name;
  a.ranks = p.ngpus;
  a.channels = p.nchannels;
  a.protocol = p.proto;
  a.source_file = doc.file;
  const int32_t c = p.nchunksperloop, r = p.ngpus;
  auto divisible = [&](const char* why) {
    if (c % r != 0)
      fail_attr(doc, p.elem, "nchunksperloop",
                "coll=" + p.coll + " needs nchunksperloop to be a multiple of ngpus=" + std::to_string(r) + " (" + why +
                    "), not " + std::to_string(c));
  };
  // MSCCL cuts the call's whole buffer (count x sizeMultiplier elements) into nchunksperloop
  // chunks: the output for allgather, the input for reducescatter, either for the others.
  if (p.coll == "allreduce") {
    a.collective = Collective::AllReduce;
    a.input_chunks = a.output_chunks = c;
  } else if (p.coll == "allgather") {
    divisible("each gpu contributes nchunksperloop/ngpus chunks");
    a.collective = Collective::AllGather;
    a.output_chunks = c;
    a.input_chunks = c / r;
  } else if (p.coll == "reducescatter" || p.coll == "reduce_scatter") {  // msccl-tools writes either
    divisible("each gpu keeps nchunksperloop/ngpus chunks");
    a.collective = Collective::ReduceScatter;
    a.input_chunks = c;
    a.output_chunks = c / r;
  } else if (p.coll == "alltoall") {
    divisible("each gpu sends nchunksperloop/ngpus chunks to each gpu");
    a.collective = Collective::AllToAll;
    a.input_chunks = a.output_chunks = c;
  } else if (p.coll == "broadcast" || p.coll == "reduce") {
    a.collective = p.coll == "broadcast" ? Collective::Broadcast : Collective::Reduce;
    a.input_chunks = a.output_chunks = c;
    a.root = std::max(p.root, 0);  // MSCCL's format has no root; weft's optional attribute, default 0
  } else if (p.coll == "custom") {
    // A collective of the file's own (msccl-tools' custom collectives): no standard
    // postcondition to check, so the verifier checks races and double counts only. MSCCL
    // cuts both buffers into nchunksperloop chunks (its size multiplier is 1).
    a.collective = Collective::Custom;
    a.input_chunks = a.output_chunks = c;
  } else if (p.coll == "send" || p.coll == "recv" || p.coll == "gather" || p.coll == "scatter" || p.coll == "alltoallv") {
    fail_attr(doc, p.elem, "coll",
              "coll=" + p.coll + " is an MSCCL operation weft does not import; it imports allreduce, allgather, "
              "reducescatter (or reduce_scatter), alltoall, broadcast, reduce and custom");
  } else {
    fail_attr(doc, p.elem, "coll",
              "\"" + p.coll +
                  "\" is not a collective (allreduce, allgather, reducescatter or reduce_scatter, alltoall, broadcast, "
                  "reduce, custom)");
  }

  if (options.ranks && *options.ranks != p.ngpus)
    fail_attr(doc, p.elem, "ngpus",
              "the file is for ngpus=" + std::to_string(p.ngpus) + " gpus, not the " + std::to_string(*options.ranks) + " asked for");
  a.gpus_per_node = options.gpus_per_node;
  a.nics_per_node = options.nics_per_node;
  bool in_place = options.in_place.value_or(p.inplace);
  if (in_place && !p.inplace)
    fail_attr(doc, p.elem, "inplace", "an in-place import was asked for, but the file says inplace=0");
  if (!in_place && !p.outofplace)
    fail_attr(doc, p.elem, p.elem && p.elem->find("outofplace") ? "outofplace" : "inplace",
              "an out-of-place import was asked for, but the file runs in place only");
  a.in_place = in_place;

  for (const MscclGpu& g : p.gpus) {
    a.scratch_chunks = std::max(a.scratch_chunks, g.s_chunks);
    auto why = "coll=" + p.coll + " with nchunksperloop=" + std::to_string(c) + " and ngpus=" + std::to_string(r) + " gives each gpu ";
    if (g.i_chunks > a.input_chunks)
      fail_attr(doc, g.elem, "i_chunks",
                "gpu " + std::to_string(g.id) + " declares " + std::to_string(g.i_chunks) + " input chunks, but " + why +
                    std::to_string(a.input_chunks));
    if (g.o_chunks > a.output_chunks)
      fail_attr(doc, g.elem, "o_chunks",
                "gpu " + std::to_string(g.id) + " declares " + std::to_string(g.o_chunks) + " output chunks, but " + why +
                    std::to_string(a.output_chunks));
  }
  return a;
}

// One recovered transfer and where it happens: it reads its source when `read_node` runs
// and writes its destination when `write_node` runs. `sub` orders the parts of one fused
// step: 0 its local copy-in, 1 its receive, 2 its forward.
struct Rec {
  Transfer t;
  int32_t read_node = 0, write_node = 0;
  uint8_t read_sub = 0, write_sub = 0;
};

enum class Access : uint8_t { Read, Write, ReduceWrite };

struct Event {
  uint64_t slot;
  int64_t key;
  int32_t rec;
  Access access;
};

class Recovery {
 public:
  Recovery(const xml::Document& doc, Algorithm& alg, const StepGraph& g)
      : doc_(doc), alg_(alg), g_(g), temp_(g.nodes().size(), -1) {}

  /// Recovers the transfers into alg.transfers (sorted by step) and returns, per step node,
  /// the transfer indices it takes part in.
  std::vector<std::vector<int32_t>> run(int32_t& rrs_scratch) {
    // Pass 1: every rrs reduces into its own source chunk; keep that where the chunk is
    // dead afterwards, else give the rrs a scratch chunk of its own.
    std::vector<Rec> recs = build();
    std::vector<Event> events = collect(recs);
    int32_t base = alg_.scratch_chunks;
    for (size_t n = 0; n < g_.nodes().size(); ++n) {
      const MscclStep& st = *g_.nodes()[n].step;
      if (st.type != MscclStepType::RecvReduceSend || rrs_source_dead(static_cast<int32_t>(n), events)) continue;
      temp_[n] = alg_.scratch_chunks;
      alg_.scratch_chunks += st.cnt;
      if (alg_.scratch_chunks > (1 << 28))
        fail_attr(doc_, st.elem, "cnt", "the rrs steps need more scratch chunks than weft can address");
    }
    rrs_scratch = alg_.scratch_chunks - base;
    if (rrs_scratch > 0) {
      recs = build();
      events = collect(recs);
    }
    std::vector<int32_t> step = order(recs, events);

    std::vector<int32_t> idx(recs.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    auto key = [&](int32_t i) {
      const Transfer& t = recs[static_cast<size_t>(i)].t;
      return std::make_tuple(step[static_cast<size_t>(i)], t.src_rank, t.src_buffer, t.src_index, t.dst_rank,
                             t.dst_buffer, t.dst_index, t.count, t.op);
    };
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
    std::vector<std::vector<int32_t>> by_node(g_.nodes().size());
    alg_.transfers.clear();
    alg_.transfer_locations.clear();
    for (int32_t i : idx) {
      Rec& r = recs[static_cast<size_t>(i)];
      r.t.step = step[static_cast<size_t>(i)];
      int32_t id = static_cast<int32_t>(alg_.transfers.size());
      alg_.transfers.push_back(r.t);
      const MscclStep& st = *g_.nodes()[static_cast<size_t>(r.write_node)].step;
      // The file is the Algorithm's source_file (doc_.file).
      alg_.transfer_locations.push_back({st.elem ? st.elem->pos.line : 0, st.elem ? st.elem->pos.column : 0, 0});
      by_node[static_cast<size_t>(r.write_node)].push_back(id);
      if (r.read_node != r.write_node) by_node[static_cast<size_t>(r.read_node)].push_back(id);
    }
    for (auto& v : by_node) std::sort(v.begin(), v.end());
    return by_node;
  }

 private:
  const xml::Document& doc_;
  Algorithm& alg_;
  const StepGraph& g_;
  std::vector<int32_t> temp_;  ///< per rrs node: its scratch chunk, or -1 to reduce in place

  SlotRef canon(int32_t rank, Buffer b, int32_t index) const { return canonical_slot(alg_, {rank, b, index}); }

  // The chunks a sending step forwards, and when (sub) it reads them.
  std::pair<SlotRef, uint8_t> forwarded(int32_t node) const {
    const StepNode& n = g_.nodes()[static_cast<size_t>(node)];
    const MscclStep& st = *n.step;
    switch (st.type) {
      case MscclStepType::Send: return {{n.rank, st.srcbuf, st.srcoff}, 0};
      case MscclStepType::RecvReduceSend:
        if (temp_[static_cast<size_t>(node)] >= 0) return {{n.rank, Buffer::Scratch, temp_[static_cast<size_t>(node)]}, 2};
        return {{n.rank, st.srcbuf, st.srcoff}, 2};
      default: return {{n.rank, st.dstbuf, st.dstoff}, 2};  // rcs, rrcs forward what they stored
    }
  }

  static Transfer make(SlotRef src, SlotRef dst, int32_t count, TransferOp op) {
    Transfer t;
    t.src_rank = src.rank;
    t.src_buffer = src.buffer;
    t.src_index = src.index;
    t.dst_rank = dst.rank;
    t.dst_buffer = dst.buffer;
    t.dst_index = dst.index;
    t.count = count;
    t.op = op;
    return t;
  }

  std::vector<Rec> build() const {
    std::vector<Rec> recs;
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const StepNode& n = g_.nodes()[i];
      const MscclStep& st = *n.step;
      const int32_t node = static_cast<int32_t>(i);
      SlotRef src{n.rank, st.srcbuf, st.srcoff}, dst{n.rank, st.dstbuf, st.dstoff};
      auto local = [&](SlotRef from, SlotRef to, TransferOp op) {
        recs.push_back({make(from, to, st.cnt, op), node, node, 0, 0});
      };
      auto incoming = [&](SlotRef to, TransferOp op) {
        auto [from, sub] = forwarded(n.sent_by);
        recs.push_back({make(from, to, st.cnt, op), n.sent_by, node, sub, 1});
      };
      bool same = st.srcoff >= 0 && st.dstoff >= 0 && canon(n.rank, st.srcbuf, st.srcoff) == canon(n.rank, st.dstbuf, st.dstoff);
      switch (st.type) {
        case MscclStepType::Copy:
          if (!same) local(src, dst, TransferOp::Copy);  // a copy onto itself moves nothing
          break;
        case MscclStepType::Reduce: local(src, dst, TransferOp::Reduce); break;
        case MscclStepType::Recv:
        case MscclStepType::RecvCopySend: incoming(dst, TransferOp::Copy); break;
        case MscclStepType::RecvReduceCopy:
        case MscclStepType::RecvReduceCopySend:
          if (!same) local(src, dst, TransferOp::Copy);
          incoming(dst, TransferOp::Reduce);
          break;
        case MscclStepType::RecvReduceSend: {
          SlotRef into = forwarded(node).first;
          if (temp_[i] >= 0) local(src, into, TransferOp::Copy);
          incoming(into, TransferOp::Reduce);
          break;
        }
        case MscclStepType::Send:
        case MscclStepType::Nop: break;
      }
    }
    return recs;
  }

  static uint64_t slot_key(SlotRef s) {
    return (static_cast<uint64_t>(s.rank) << 32) | (static_cast<uint64_t>(s.buffer) << 30) | static_cast<uint64_t>(s.index);
  }

  std::vector<Event> collect(const std::vector<Rec>& recs) const {
    std::vector<Event> ev;
    for (size_t i = 0; i < recs.size(); ++i) {
      const Rec& r = recs[i];
      int64_t rk = int64_t{g_.order(r.read_node)} * 4 + r.read_sub;
      int64_t wk = int64_t{g_.order(r.write_node)} * 4 + r.write_sub;
      Access w = r.t.op == TransferOp::Copy ? Access::Write : Access::ReduceWrite;
      for (int32_t k = 0; k < r.t.count; ++k) {
        ev.push_back({slot_key(canon(r.t.src_rank, r.t.src_buffer, r.t.src_index + k)), rk, static_cast<int32_t>(i), Access::Read});
        ev.push_back({slot_key(canon(r.t.dst_rank, r.t.dst_buffer, r.t.dst_index + k)), wk, static_cast<int32_t>(i), w});
      }
    }
    std::sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
      return std::tie(a.slot, a.key, a.rec) < std::tie(b.slot, b.key, b.rec);
    });
    return ev;
  }

  // True when, after rrs `node` forwards its source chunks, each of them is next fully
  // overwritten by some other transfer (or is scratch nobody touches again): reducing into
  // the source in place then changes nothing anybody observes.
  bool rrs_source_dead(int32_t node, const std::vector<Event>& ev) const {
    const StepNode& n = g_.nodes()[static_cast<size_t>(node)];
    const MscclStep& st = *n.step;
    int64_t own_last = int64_t{g_.order(node)} * 4 + 2;
    for (int32_t k = 0; k < st.cnt; ++k) {
      SlotRef c = canon(n.rank, st.srcbuf, st.srcoff + k);
      uint64_t key = slot_key(c);
      auto it = std::upper_bound(ev.begin(), ev.end(), std::make_pair(key, own_last),
                                 [](const std::pair<uint64_t, int64_t>& v, const Event& e) {
                                   return std::tie(v.first, v.second) < std::tie(e.slot, e.key);
                                 });
      if (it == ev.end() || it->slot != key) {
        if (c.buffer != Buffer::Scratch) return false;  // input/output must keep what MSCCL leaves there
        continue;
      }
      if (it->access != Access::Write) return false;
    }
    return true;
  }

  int32_t node_of(const Rec& r, Access a) const { return a == Access::Read ? r.read_node : r.write_node; }

  // The chunk `slot` (canonical) as transfer `r` names it on the side `a` touches, so that
  // messages use the file's own buffer names (in place, i and o name the same chunks).
  std::string chunk_name(const Rec& r, Access a, uint64_t slot) const {
    bool read = a == Access::Read;
    SlotRef base = read ? r.t.src() : r.t.dst();
    for (int32_t k = 0; k < r.t.count; ++k) {
      SlotRef s{base.rank, base.buffer, base.index + k};
      if (slot_key(canon(s.rank, s.buffer, s.index)) == slot)
        return std::string(to_string(s.buffer)) + " chunk " + std::to_string(s.index) + " of gpu " + std::to_string(s.rank);
    }
    return "a chunk of gpu " + std::to_string(base.rank);
  }

  // Orders the transfers: per chunk, read after write, write after read and write after
  // write, in the order the file imposes (checked: unordered accesses are a race). Returns
  // each transfer's step, the length of the longest chain of such edges before it.
  std::vector<int32_t> order(const std::vector<Rec>& recs, const std::vector<Event>& ev) const {
    std::vector<std::pair<int32_t, int32_t>> edges;
    auto edge = [&](const Event& from, const Event& to) {
      if (from.rec == to.rec) return;
      int32_t a = node_of(recs[static_cast<size_t>(from.rec)], from.access);
      int32_t b = node_of(recs[static_cast<size_t>(to.rec)], to.access);
      if (!g_.happens_before(a, b)) {
        const MscclStep& sb = *g_.nodes()[static_cast<size_t>(b)].step;
        std::string what = from.access == Access::Read ? "reads" : "writes";
        fail_at_attribute(doc_, sb.elem, "",
                     "this step " + std::string(to.access == Access::Read ? "reads" : "writes") + " " + chunk_name(recs[static_cast<size_t>(to.rec)], to.access, to.slot) +
                         ", which " + g_.describe(a) + " " + what +
                         ", and no thread-block order, dependency or connection orders the two: a race");
      }
      edges.emplace_back(from.rec, to.rec);
    };
    for (size_t i = 0; i < ev.size();) {
      size_t j = i;
      while (j < ev.size() && ev[j].slot == ev[i].slot) ++j;
      const Event* last_write = nullptr;
      std::vector<const Event*> reads;
      for (size_t k = i; k < j; ++k) {
        const Event& e = ev[k];
        if (last_write) edge(*last_write, e);
        if (e.access == Access::Read) {
          reads.push_back(&e);
        } else {
          for (const Event* r : reads) edge(*r, e);
          reads.clear();
          last_write = &e;
        }
      }
      i = j;
    }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());

    size_t n = recs.size();
    std::vector<std::vector<int32_t>> succ(n);
    std::vector<int32_t> indeg(n, 0), step(n, 0);
    for (auto [a, b] : edges) {
      succ[static_cast<size_t>(a)].push_back(b);
      ++indeg[static_cast<size_t>(b)];
    }
    std::deque<int32_t> ready;
    for (size_t v = 0; v < n; ++v)
      if (indeg[v] == 0) ready.push_back(static_cast<int32_t>(v));
    size_t done = 0;
    while (!ready.empty()) {
      int32_t v = ready.front();
      ready.pop_front();
      ++done;
      for (int32_t s : succ[static_cast<size_t>(v)]) {
        step[static_cast<size_t>(s)] = std::max(step[static_cast<size_t>(s)], step[static_cast<size_t>(v)] + 1);
        if (--indeg[static_cast<size_t>(s)] == 0) ready.push_back(s);
      }
    }
    if (done < n) {
      // Transfers that must each come before the other: the file relies on data waiting in
      // a connection's buffer while its source is overwritten (a swap through the FIFO).
      size_t v = 0;
      while (indeg[v] == 0) ++v;
      const Rec& r = recs[v];
      const MscclStep& st = *g_.nodes()[static_cast<size_t>(r.write_node)].step;
      fail_at_attribute(doc_, st.elem, "",
                   "the transfer this step completes (from " + g_.describe(r.read_node) +
                       ") is part of a cycle of transfers that each overwrite what another one still has to send: the file "
                       "relies on data waiting in a connection's buffer while its source is overwritten (a swap), which weft's "
                       "atomic transfers cannot express; route one side through a scratch chunk");
    }
    return step;
  }
};

BufferRange range(Buffer b, int32_t off) { return {b, off < 0 ? 0 : off}; }

Primitive primitive_of(MscclStepType t) {
  switch (t) {
    case MscclStepType::Send: return Primitive::Send;
    case MscclStepType::Recv: return Primitive::Recv;
    case MscclStepType::RecvCopySend: return Primitive::RecvCopySend;
    case MscclStepType::RecvReduceSend: return Primitive::RecvReduceSend;
    case MscclStepType::RecvReduceCopy: return Primitive::RecvReduceCopy;
    case MscclStepType::RecvReduceCopySend: return Primitive::RecvReduceCopySend;
    case MscclStepType::Copy: return Primitive::Copy;
    case MscclStepType::Reduce: return Primitive::Reduce;
    case MscclStepType::Nop: return Primitive::Nop;
  }
  return Primitive::Nop;
}

Plan as_given_plan(const MscclProgram& p, const Algorithm& alg, const StepGraph& g,
                   const std::vector<std::vector<int32_t>>& tasks) {
  Plan plan;
  plan.algorithm = alg.name;
  plan.collective = alg.collective;
  plan.num_ranks = alg.ranks;
  plan.input_chunks = alg.input_chunks;
  plan.output_chunks = alg.output_chunks;
  for (const MscclGpu& gpu : p.gpus) plan.scratch_chunks = std::max(plan.scratch_chunks, gpu.s_chunks);
  plan.in_place = alg.in_place;
  plan.root = alg.root;
  plan.protocol = p.proto;
  plan.execution = ExecutionModel::Algorithm;
  plan.scheduler = "as-given";
  plan.allocator = "as-given";
  plan.num_subpipelines = 1;
  const BufferRange nop_range{plan.output_chunks > 0  ? Buffer::Output
                              : plan.input_chunks > 0 ? Buffer::Input
                                                      : Buffer::Scratch,
                              0};
  for (const MscclGpu& gpu : p.gpus) {
    RankPlan rp;
    rp.rank = gpu.id;
    for (const MscclThreadBlock& tb : gpu.tbs) {
      ThreadBlock out;
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const MscclStep& st = tb.steps[s];
        int32_t node = g.node_id(gpu.id, tb.id, static_cast<int32_t>(s));
        Slot slot;
        slot.primitive = primitive_of(st.type);
        slot.send_peer = msccl_step_sends(st.type) ? tb.send : -1;
        slot.recv_peer = msccl_step_receives(st.type) ? tb.recv : -1;
        slot.channel = tb.chan;
        bool reads = msccl_step_reads_src(st.type), writes = msccl_step_writes_dst(st.type);
        if (reads) slot.src = range(st.srcbuf, st.srcoff);
        if (writes) slot.dst = range(st.dstbuf, st.dstoff);
        // The side a step does not use names the side it does, as the compiler writes it
        // (a send's dst is its src, a receive's src its dst), so that every range of the
        // plan lies within its buffer; a nop names the first chunk of a buffer that has one.
        if (reads && !writes) slot.dst = slot.src;
        if (writes && !reads) slot.src = slot.dst;
        if (!reads && !writes) slot.src = slot.dst = nop_range;
        slot.count = st.type == MscclStepType::Nop ? 1 : st.cnt;
        // A wait for an earlier step of the same thread block is implied by program order
        // (MSCCL allows it); a plan's dependencies name other thread blocks only.
        int32_t dep = g.nodes()[static_cast<size_t>(node)].dep;
        if (dep >= 0 && g.nodes()[static_cast<size_t>(dep)].tb != tb.id)
          slot.deps.push_back({g.nodes()[static_cast<size_t>(dep)].tb, g.nodes()[static_cast<size_t>(dep)].pos});
        slot.tasks = tasks[static_cast<size_t>(node)];
        out.slots.push_back(std::move(slot));
      }
      rp.tbs.push_back(std::move(out));
    }
    plan.ranks.push_back(std::move(rp));
  }
  return plan;
}

}  // namespace

MscclImport import_msccl(std::string_view text, const std::string& file, const MscclImportOptions& options) {
  xml::Document doc = xml::parse(text, file);
  MscclProgram program = read_msccl_program(doc);
  MscclImport out;
  out.algorithm = make_header(doc, program, options);
  out.nchunksperloop = program.nchunksperloop;
  out.min_bytes = program.min_bytes;
  out.max_bytes = program.max_bytes;
  StepGraph graph(doc, program);
  Recovery recovery(doc, out.algorithm, graph);
  std::vector<std::vector<int32_t>> tasks = recovery.run(out.rrs_scratch_chunks);
  out.as_given = as_given_plan(program, out.algorithm, graph, tasks);
  return out;
}

MscclImportOptions msccl_options_from_params(const ParamMap& params, const std::string& file) {
  MscclImportOptions options;
  auto number = [&](const std::string& name, const std::string& value, int32_t lo) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > INT32_MAX)
      fail(ErrorCode::InvalidArgument, file + ": " + name + " must be an integer of at least " + std::to_string(lo) + ", not '" + value + "'");
    return static_cast<int32_t>(v);
  };
  for (const auto& [name, value] : params) {
    if (name == "InPlace") {
      if (value != "0" && value != "1")
        fail(ErrorCode::InvalidArgument, file + ": InPlace must be 0 or 1, not '" + value + "'");
      options.in_place = value == "1";
    } else if (name == "nRanks") {
      options.ranks = number(name, value, 1);
    } else if (name == "GPUPerNode") {
      options.gpus_per_node = number(name, value, 1);
    } else if (name == "NICPerNode") {
      options.nics_per_node = number(name, value, 0);
    } else {
      fail(ErrorCode::InvalidArgument, file + ": MSCCL XML files take no parameter '" + name +
                                           "' (only InPlace=0|1, and nRanks, GPUPerNode, NICPerNode as a topology gives them)");
    }
  }
  return options;
}

bool is_msccl_xml_path(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
}

MscclImport import_msccl_file(const std::string& path, const MscclImportOptions& options) {
  std::optional<std::string> contents = text::read_file(path);
  if (!contents) fail(ErrorCode::System, "cannot read " + path + ": " + std::strerror(errno));
  return import_msccl(*contents, path, options);
}

}  // namespace weft
