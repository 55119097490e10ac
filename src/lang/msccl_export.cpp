#include "lang/msccl_export.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "util/error.hpp"

namespace weft {

namespace {

constexpr int32_t kMaxStepChunks = 64;  // MSCCL's executor takes counts below 72
constexpr int32_t kMaxRefinement = 64;

using Conn = std::pair<int32_t, int32_t>;  // (peer, channel)

// One MSCCL operation cut from a plan slot (a slot gives one, or two when a fused
// primitive must be split into its receive and its send).
struct Part {
  int32_t tb = 0, slot = 0;  ///< the plan slot it comes from
  MscclStepType type = MscclStepType::Nop;
  Buffer src_buf = Buffer::Input, dst_buf = Buffer::Output;
  int32_t src_base = -1, dst_base = -1;  ///< first chunk, already refined (-1: unused)
  int32_t count = 0;                     ///< chunks of the plan (before refinement)
  int32_t instance = 0, instances = 1;
  int32_t send_peer = -1, recv_peer = -1, channel = 0;
  std::vector<SlotDep> deps;             ///< the slot's own deps (first part of a slot only)
  int32_t group = -1;                    ///< MSCCL thread block (index on the rank)
  bool real() const { return type != MscclStepType::Nop; }
  bool sends() const { return msccl_step_sends(type); }
  bool receives() const { return msccl_step_receives(type); }
};

// A planned MSCCL step: a piece of a part, or a nop carrying one dependency.
struct Entry {
  int32_t part = -1;
  bool nop = false;
  int32_t src = -1, dst = -1, cnt = 0;
  int32_t dep = -1;  ///< the part waited for, or -1
};

MscclStepType step_type(Primitive p) {
  switch (p) {
    case Primitive::Send: return MscclStepType::Send;
    case Primitive::Recv: return MscclStepType::Recv;
    case Primitive::RecvReduceCopy: return MscclStepType::RecvReduceCopy;
    case Primitive::RecvCopySend: return MscclStepType::RecvCopySend;
    case Primitive::RecvReduceCopySend: return MscclStepType::RecvReduceCopySend;
    case Primitive::RecvReduceSend: return MscclStepType::RecvReduceSend;
    case Primitive::Copy: return MscclStepType::Copy;
    case Primitive::Reduce: return MscclStepType::Reduce;
    case Primitive::Nop: return MscclStepType::Nop;
  }
  return MscclStepType::Nop;
}

std::string coll_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllToAll: return "alltoall";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::Custom: return "custom";
  }
  return "custom";
}

struct UnionFind {
  std::vector<int32_t> p;
  explicit UnionFind(size_t n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  int32_t find(int32_t x) { return p[static_cast<size_t>(x)] == x ? x : p[static_cast<size_t>(x)] = find(p[static_cast<size_t>(x)]); }
  void unite(int32_t a, int32_t b) { p[static_cast<size_t>(find(a))] = find(b); }
};

class RankExporter {
 public:
  RankExporter(const Plan& plan, const RankPlan& rp, int32_t refine)
      : plan_(plan), rp_(rp), I_(refine), scratch_next_(plan.scratch_chunks * refine) {}

  MscclGpu run() {
    make_parts();
    for (size_t t = 0; t < rp_.tbs.size(); ++t) group_tb(static_cast<int32_t>(t));
    check_connections();
    plan_entries();
    return emit();
  }

 private:
  const Plan& plan_;
  const RankPlan& rp_;
  int32_t I_;
  int32_t scratch_next_;
  std::vector<Part> parts_;
  std::vector<std::vector<int32_t>> tb_parts_;                  ///< [plan tb] -> parts in order
  std::map<std::pair<int32_t, int32_t>, int32_t> slot_last_;    ///< (tb, slot) -> its last part
  std::vector<std::pair<Conn, Conn>> groups_;                   ///< (send conn, recv conn); peer -1: none
  std::vector<int32_t> group_channel_;
  std::vector<std::vector<Entry>> entries_;                     ///< [group]
  std::vector<int32_t> last_real_pos_;                          ///< [part] position of its last step

  std::string where(int32_t tb, int32_t slot) const {
    return "rank " + std::to_string(rp_.rank) + ", thread block " + std::to_string(tb) + ", slot " + std::to_string(slot);
  }

  void make_parts() {
    tb_parts_.resize(rp_.tbs.size());
    for (size_t t = 0; t < rp_.tbs.size(); ++t) {
      const auto& slots = rp_.tbs[t].slots;
      for (size_t s = 0; s < slots.size(); ++s) {
        const Slot& sl = slots[s];
        Part p;
        p.tb = static_cast<int32_t>(t);
        p.slot = static_cast<int32_t>(s);
        p.type = step_type(sl.primitive);
        p.count = sl.count;
        p.instance = sl.instance;
        p.instances = std::max(sl.instances, 1);
        p.channel = sl.channel;
        p.deps = sl.deps;
        if (p.real() && p.count < 1)
          fail(ErrorCode::InvalidArgument, where(p.tb, p.slot) + ": a " + std::string(to_string(sl.primitive)) + " of " +
                                               std::to_string(p.count) + " chunks cannot be exported");
        if (p.sends()) {
          if (sl.send_peer < 0 || sl.send_peer >= plan_.num_ranks)
            fail(ErrorCode::InvalidArgument, where(p.tb, p.slot) + ": a sending slot needs a send peer in range, not " +
                                                 std::to_string(sl.send_peer));
          p.send_peer = sl.send_peer;
        }
        if (p.receives()) {
          if (sl.recv_peer < 0 || sl.recv_peer >= plan_.num_ranks)
            fail(ErrorCode::InvalidArgument, where(p.tb, p.slot) + ": a receiving slot needs a receive peer in range, not " +
                                                 std::to_string(sl.recv_peer));
          p.recv_peer = sl.recv_peer;
        }
        if (msccl_step_reads_src(p.type)) {
          p.src_buf = sl.src.buffer;
          p.src_base = sl.src.index * I_;
        }
        if (msccl_step_writes_dst(p.type)) {
          p.dst_buf = sl.dst.buffer;
          p.dst_base = sl.dst.index * I_;
        }
        tb_parts_[t].push_back(static_cast<int32_t>(parts_.size()));
        slot_last_[{p.tb, p.slot}] = static_cast<int32_t>(parts_.size());
        parts_.push_back(std::move(p));
      }
    }
  }

  // Splits fused part `k` into a receive part (which keeps the slot's deps) and a send part.
  void unfuse(int32_t t, size_t pos) {
    int32_t k = tb_parts_[static_cast<size_t>(t)][pos];
    Part recv = parts_[static_cast<size_t>(k)];
    Part send = recv;
    recv.send_peer = -1;
    send.recv_peer = -1;
    send.deps.clear();
    send.type = MscclStepType::Send;
    switch (recv.type) {
      case MscclStepType::RecvCopySend:
        recv.type = MscclStepType::Recv;
        send.src_buf = recv.dst_buf;
        send.src_base = recv.dst_base;
        break;
      case MscclStepType::RecvReduceCopySend:
        recv.type = MscclStepType::RecvReduceCopy;
        send.src_buf = recv.dst_buf;
        send.src_base = recv.dst_base;
        break;
      case MscclStepType::RecvReduceSend:
        // MSCCL's rrs stores nothing; split, the sum needs a home: a fresh scratch range.
        recv.type = MscclStepType::RecvReduceCopy;
        recv.dst_buf = Buffer::Scratch;
        recv.dst_base = scratch_next_;
        scratch_next_ += recv.count * I_;
        send.src_buf = Buffer::Scratch;
        send.src_base = recv.dst_base;
        break;
      default: return;
    }
    send.dst_base = -1;
    parts_[static_cast<size_t>(k)] = recv;
    int32_t s = static_cast<int32_t>(parts_.size());
    parts_.push_back(send);
    auto& list = tb_parts_[static_cast<size_t>(t)];
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(pos) + 1, s);
    slot_last_[{send.tb, send.slot}] = s;
  }

  // A block without connections keeps the channel its slots name (MSCCL ignores it).
  int32_t new_group(Conn send, Conn recv, int32_t local_channel = 0) {
    groups_.push_back({send, recv});
    group_channel_.push_back(send.first >= 0 ? send.second : recv.first >= 0 ? recv.second : local_channel);
    return static_cast<int32_t>(groups_.size()) - 1;
  }

  void group_tb(int32_t t) {
    auto& list = tb_parts_[static_cast<size_t>(t)];
    auto conns = [&](const std::vector<int32_t>& ps, std::set<Conn>& sends, std::set<Conn>& recvs) {
      for (int32_t k : ps) {
        const Part& p = parts_[static_cast<size_t>(k)];
        if (p.sends()) sends.insert({p.send_peer, p.channel});
        if (p.receives()) recvs.insert({p.recv_peer, p.channel});
      }
    };
    std::set<Conn> sends, recvs;
    conns(list, sends, recvs);
    bool one_channel = sends.empty() || recvs.empty() || sends.begin()->second == recvs.begin()->second;
    if (sends.size() <= 1 && recvs.size() <= 1 && one_channel) {
      int32_t local = list.empty() ? 0 : parts_[static_cast<size_t>(list[0])].channel;
      int32_t g = new_group(sends.empty() ? Conn{-1, 0} : *sends.begin(), recvs.empty() ? Conn{-1, 0} : *recvs.begin(), local);
      for (int32_t k : list) parts_[static_cast<size_t>(k)].group = g;
      return;
    }
    // Components of parts linked by a shared connection; split the fused parts of any
    // component that would need two send or two receive peers, then group again.
    for (int round = 0; round < 2; ++round) {
      UnionFind uf(list.size());
      std::map<std::pair<int, Conn>, int32_t> first_user;
      for (size_t i = 0; i < list.size(); ++i) {
        const Part& p = parts_[static_cast<size_t>(list[i])];
        if (p.sends()) {
          auto [it, fresh] = first_user.emplace(std::make_pair(0, Conn{p.send_peer, p.channel}), static_cast<int32_t>(i));
          if (!fresh) uf.unite(static_cast<int32_t>(i), it->second);
        }
        if (p.receives()) {
          auto [it, fresh] = first_user.emplace(std::make_pair(1, Conn{p.recv_peer, p.channel}), static_cast<int32_t>(i));
          if (!fresh) uf.unite(static_cast<int32_t>(i), it->second);
        }
      }
      std::map<int32_t, std::pair<std::set<Conn>, std::set<Conn>>> comp;
      for (size_t i = 0; i < list.size(); ++i) {
        const Part& p = parts_[static_cast<size_t>(list[i])];
        auto& c = comp[uf.find(static_cast<int32_t>(i))];
        if (p.sends()) c.first.insert({p.send_peer, p.channel});
        if (p.receives()) c.second.insert({p.recv_peer, p.channel});
      }
      bool split = false;
      for (size_t i = list.size(); i-- > 0;) {
        const Part& p = parts_[static_cast<size_t>(list[i])];
        const auto& c = comp[uf.find(static_cast<int32_t>(i))];
        if (p.sends() && p.receives() && (c.first.size() > 1 || c.second.size() > 1)) {
          unfuse(t, i);
          split = true;
        }
      }
      if (split) continue;
      // One MSCCL thread block per component; a send-only and a receive-only component on
      // one channel share a block (MSCCL allows one peer of each kind).
      std::map<int32_t, int32_t> comp_group;
      std::map<int32_t, std::vector<int32_t>> open_send, open_recv;  // channel -> groups with a free side
      for (size_t i = 0; i < list.size(); ++i) {
        int32_t root = uf.find(static_cast<int32_t>(i));
        const Part& p = parts_[static_cast<size_t>(list[i])];
        if (!p.sends() && !p.receives()) continue;
        if (comp_group.count(root)) continue;
        const auto& c = comp[root];
        Conn s = c.first.empty() ? Conn{-1, 0} : *c.first.begin();
        Conn r = c.second.empty() ? Conn{-1, 0} : *c.second.begin();
        int32_t g = -1;
        if (s.first >= 0 && r.first < 0 && !open_recv[s.second].empty()) {
          g = open_recv[s.second].front();
          open_recv[s.second].erase(open_recv[s.second].begin());
          groups_[static_cast<size_t>(g)].first = s;
        } else if (r.first >= 0 && s.first < 0 && !open_send[r.second].empty()) {
          g = open_send[r.second].front();
          open_send[r.second].erase(open_send[r.second].begin());
          groups_[static_cast<size_t>(g)].second = r;
        } else {
          g = new_group(s, r);
          if (s.first >= 0 && r.first < 0) open_send[s.second].push_back(g);  // has a free receive side
          if (r.first >= 0 && s.first < 0) open_recv[r.second].push_back(g);  // has a free send side
        }
        comp_group[root] = g;
      }
      // Local parts join the block of the part before them (or after, at the start).
      int32_t prev = -1;
      for (size_t i = 0; i < list.size(); ++i) {
        Part& p = parts_[static_cast<size_t>(list[i])];
        if (p.sends() || p.receives()) {
          p.group = comp_group[uf.find(static_cast<int32_t>(i))];
          prev = p.group;
        } else {
          p.group = prev;
        }
      }
      int32_t next = -1;
      for (size_t i = list.size(); i-- > 0;) {
        Part& p = parts_[static_cast<size_t>(list[i])];
        if (p.group >= 0) next = p.group;
        else p.group = next >= 0 ? next : (next = new_group({-1, 0}, {-1, 0}, p.channel));
      }
      return;
    }
    WEFT_ASSERT(false, "splitting fused primitives did not separate the connections of " + where(t, 0));
  }

  void check_connections() const {
    std::map<Conn, size_t> send, recv;
    for (size_t g = 0; g < groups_.size(); ++g) {
      auto [s, r] = groups_[g];
      if (s.first >= 0 && !send.emplace(s, g).second)
        fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rp_.rank) + " sends to rank " + std::to_string(s.first) +
                                             " on channel " + std::to_string(s.second) +
                                             " from two thread blocks; MSCCL needs one thread block per connection");
      if (r.first >= 0 && !recv.emplace(r, g).second)
        fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rp_.rank) + " receives from rank " + std::to_string(r.first) +
                                             " on channel " + std::to_string(r.second) +
                                             " in two thread blocks; MSCCL needs one thread block per connection");
    }
  }

  // The parts with steps that a wait for part `k` must wait for: k itself, or for a nop,
  // what the nop waits for and what precedes it.
  void resolve(int32_t k, std::set<int32_t>& out, std::set<int32_t>& seen) const {
    if (!seen.insert(k).second) return;
    const Part& p = parts_[static_cast<size_t>(k)];
    if (p.real()) {
      out.insert(k);
      return;
    }
    for (const SlotDep& d : p.deps) resolve_slot(d, out, seen);
    const auto& list = tb_parts_[static_cast<size_t>(p.tb)];
    auto it = std::find(list.begin(), list.end(), k);
    if (it != list.begin()) resolve(*std::prev(it), out, seen);
  }

  void resolve_slot(const SlotDep& d, std::set<int32_t>& out, std::set<int32_t>& seen) const {
    auto it = slot_last_.find({d.tb, d.slot});
    if (it == slot_last_.end())
      fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rp_.rank) + ": a dependency names thread block " +
                                           std::to_string(d.tb) + ", slot " + std::to_string(d.slot) + ", which does not exist");
    resolve(it->second, out, seen);
  }

  // Pieces of a real part: (src, dst, cnt) per MSCCL step, refined and cut to size.
  std::vector<Entry> pieces(int32_t k) const {
    const Part& p = parts_[static_cast<size_t>(k)];
    int32_t sub = I_ / p.instances;
    std::vector<Entry> out;
    for (int32_t c = 0; c < p.count; ++c) {
      int32_t src = p.src_base < 0 ? -1 : p.src_base + c * I_ + p.instance * sub;
      int32_t dst = p.dst_base < 0 ? -1 : p.dst_base + c * I_ + p.instance * sub;
      if (!out.empty()) {
        Entry& last = out.back();
        bool contiguous = (src < 0 || last.src + last.cnt == src) && (dst < 0 || last.dst + last.cnt == dst);
        if (contiguous && last.cnt + sub <= kMaxStepChunks) {
          last.cnt += sub;
          continue;
        }
      }
      out.push_back({k, false, src, dst, sub, -1});
    }
    // A single chunk refined beyond the step limit (sub > 64) is cut further.
    std::vector<Entry> cut;
    for (const Entry& e : out) {
      for (int32_t off = 0; off < e.cnt; off += kMaxStepChunks) {
        Entry x = e;
        x.cnt = std::min(kMaxStepChunks, e.cnt - off);
        if (x.src >= 0) x.src += off;
        if (x.dst >= 0) x.dst += off;
        cut.push_back(x);
      }
    }
    return cut;
  }

  void plan_entries() {
    entries_.assign(groups_.size(), {});
    std::vector<size_t> pos_in_tb(parts_.size(), 0);
    for (const auto& list : tb_parts_)
      for (size_t i = 0; i < list.size(); ++i) pos_in_tb[static_cast<size_t>(list[i])] = i;
    for (size_t t = 0; t < tb_parts_.size(); ++t) {
      const auto& list = tb_parts_[t];
      for (size_t i = 0; i < list.size(); ++i) {
        int32_t k = list[i];
        const Part& p = parts_[static_cast<size_t>(k)];
        std::set<int32_t> targets, seen{k};
        for (const SlotDep& d : p.deps) resolve_slot(d, targets, seen);
        // Blocks cut from one plan thread block keep its order: wait for the part before.
        if (i > 0 && parts_[static_cast<size_t>(list[i - 1])].group != p.group) resolve(list[i - 1], targets, seen);
        std::vector<int32_t> deps;
        for (int32_t d : targets) {
          const Part& q = parts_[static_cast<size_t>(d)];
          bool earlier_same_block = q.group == p.group && q.tb == p.tb && pos_in_tb[static_cast<size_t>(d)] < i;  // program order covers it
          if (!earlier_same_block) deps.push_back(d);
        }
        auto& es = entries_[static_cast<size_t>(p.group)];
        if (!p.real()) {
          for (int32_t d : deps) es.push_back({k, true, -1, -1, 0, d});
          continue;
        }
        std::vector<Entry> ps = pieces(k);
        if (deps.empty() && !es.empty() && es.back().nop) {
          // MSCCL folds nops into the next step and wants that step to wait too: take the
          // last nop's dependency over.
          ps.front().dep = es.back().dep;
          es.pop_back();
        } else if (!deps.empty()) {
          for (size_t d = 1; d < deps.size(); ++d) es.push_back({k, true, -1, -1, 0, deps[d]});
          ps.front().dep = deps[0];
        }
        for (const Entry& e : ps) es.push_back(e);
      }
    }
    last_real_pos_.assign(parts_.size(), -1);
    for (auto& es : entries_)
      for (size_t pos = 0; pos < es.size(); ++pos)
        if (!es[pos].nop) last_real_pos_[static_cast<size_t>(es[pos].part)] = static_cast<int32_t>(pos);
  }

  MscclGpu emit() const {
    MscclGpu gpu;
    gpu.id = rp_.rank;
    gpu.i_chunks = plan_.input_chunks * I_;
    gpu.o_chunks = plan_.output_chunks * I_;
    gpu.s_chunks = scratch_next_;
    gpu.tbs.resize(groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      MscclThreadBlock& tb = gpu.tbs[g];
      tb.id = static_cast<int32_t>(g);
      tb.send = groups_[g].first.first;
      tb.recv = groups_[g].second.first;
      tb.chan = group_channel_[g];
      for (size_t pos = 0; pos < entries_[g].size(); ++pos) {
        const Entry& e = entries_[g][pos];
        const Part& p = parts_[static_cast<size_t>(e.part)];
        MscclStep st;
        st.s = static_cast<int32_t>(pos);
        st.type = e.nop ? MscclStepType::Nop : p.type;
        if (!e.nop && msccl_step_reads_src(p.type)) {
          st.srcbuf = p.src_buf;
          st.srcoff = e.src;
        }
        if (!e.nop && msccl_step_writes_dst(p.type)) {
          st.dstbuf = p.dst_buf;
          st.dstoff = e.dst;
        }
        st.cnt = e.nop ? 0 : e.cnt;
        if (e.dep >= 0) {
          const Part& q = parts_[static_cast<size_t>(e.dep)];
          st.depid = q.group;
          st.deps = last_real_pos_[static_cast<size_t>(e.dep)];
        }
        tb.steps.push_back(st);
      }
    }
    // Steps that others wait for signal when done.
    for (const MscclThreadBlock& tb : gpu.tbs)
      for (const MscclStep& st : tb.steps)
        if (st.depid >= 0) gpu.tbs[static_cast<size_t>(st.depid)].steps[static_cast<size_t>(st.deps)].hasdep = true;
    return gpu;
  }
};

}  // namespace

MscclProgram plan_to_msccl(const Plan& plan, const MscclExportOptions& options) {
  MscclProgram p;
  p.name = options.name.empty() ? plan.algorithm : options.name;
  // MSCCL cuts both buffers of a custom collective into nchunksperloop chunks.
  if (plan.collective == Collective::Custom && plan.input_chunks != plan.output_chunks)
    fail(ErrorCode::InvalidArgument,
         "a Custom plan exports as MSCCL's coll=\"custom\", whose buffers both hold nchunksperloop chunks; this plan has " +
             std::to_string(plan.input_chunks) + " input and " + std::to_string(plan.output_chunks) + " output chunks");
  p.coll = coll_name(plan.collective);
  p.proto = plan.protocol == "LL" || plan.protocol == "LL128" ? plan.protocol : "Simple";
  p.ngpus = plan.num_ranks;
  p.inplace = plan.in_place;
  p.outofplace = !plan.in_place;
  if (plan.collective == Collective::Broadcast || plan.collective == Collective::Reduce) p.root = plan.root;
  p.min_bytes = options.min_bytes;
  p.max_bytes = options.max_bytes;
  if (static_cast<int32_t>(plan.ranks.size()) != plan.num_ranks)
    fail(ErrorCode::InvalidArgument, "the plan has " + std::to_string(plan.ranks.size()) + " rank plans for " +
                                         std::to_string(plan.num_ranks) + " ranks");
  int64_t refine = 1;
  for (const RankPlan& rp : plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        refine = std::lcm(refine, int64_t{std::max(s.instances, 1)});
        if (refine > kMaxRefinement)
          fail(ErrorCode::InvalidArgument, "the plan's instance counts need every chunk cut into more than " +
                                               std::to_string(kMaxRefinement) + " parts; MSCCL XML cannot express it");
      }
  const auto I = static_cast<int32_t>(refine);
  p.nchunksperloop = (plan.collective == Collective::AllGather ? plan.output_chunks : plan.input_chunks) * I;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    if (plan.ranks[r].rank != static_cast<int32_t>(r))
      fail(ErrorCode::InvalidArgument, "rank plan " + std::to_string(r) + " is for rank " + std::to_string(plan.ranks[r].rank));
    p.gpus.push_back(RankExporter(plan, plan.ranks[r], I).run());
  }
  p.nchannels = 1;
  for (const MscclGpu& g : p.gpus)
    for (const MscclThreadBlock& tb : g.tbs) p.nchannels = std::max(p.nchannels, tb.chan + 1);
  return p;
}

std::string export_msccl(const Plan& plan, const MscclExportOptions& options) {
  return write_msccl_program(plan_to_msccl(plan, options));
}

}  // namespace weft
