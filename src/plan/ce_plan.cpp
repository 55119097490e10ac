#include "plan/ce_plan.hpp"

#include <algorithm>

#include "ir/plan_core.hpp"
#include "util/error.hpp"

namespace weft::ce {

namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

Slot make_slot(Primitive p, int send_peer, int recv_peer, BufferRange src, BufferRange dst, int channel) {
  Slot s;
  s.primitive = p;
  s.send_peer = send_peer;
  s.recv_peer = recv_peer;
  s.src = src;
  s.dst = dst;
  s.channel = channel;
  return s;
}

/// Scratch chunk on rank q where rank r's reduce-scatter contribution lands.
int landing(int q, int r, int R) { return mod(r - q - 1, R); }

void allgather_rank(RankPlan& rp, int R, bool in_place) {
  const int r = rp.rank;
  const BufferRange mine = in_place ? BufferRange{Buffer::Output, r} : BufferRange{Buffer::Input, 0};
  ThreadBlock send, recv;
  for (int j = 1; j < R; ++j) send.slots.push_back(make_slot(Primitive::Send, mod(r + j, R), -1, mine, {}, 0));
  for (int j = 1; j < R; ++j)
    recv.slots.push_back(make_slot(Primitive::Recv, -1, mod(r - j, R), {}, {Buffer::Output, mod(r - j, R)}, 0));
  rp.tbs = {send, recv};
  if (!in_place) {
    ThreadBlock copy;
    copy.slots.push_back(make_slot(Primitive::Copy, -1, -1, mine, {Buffer::Output, r}, 0));
    rp.tbs.push_back(copy);
  }
}

/// Chunk slots are (owner q, piece k) -> q * K + k: owner q's part of the buffer is K
/// consecutive slots, reduced and sent on piece by piece.
void allreduce_rank(RankPlan& rp, int R, bool in_place, int K) {
  const int r = rp.rank;
  auto at = [&](int owner, int k) { return owner * K + k; };
  ThreadBlock rs_send, rs_recv, reduce, ag_send, ag_recv;
  for (int k = 0; k < K; ++k)
    for (int j = 1; j < R; ++j) {
      const int q = mod(r + j, R);
      rs_send.slots.push_back(make_slot(Primitive::Send, q, -1, {Buffer::Input, at(q, k)}, {}, 0));
    }
  for (int k = 0; k < K; ++k)
    for (int j = 1; j < R; ++j) {
      const int p = mod(r - j, R);
      rs_recv.slots.push_back(make_slot(Primitive::Recv, -1, p, {}, {Buffer::Scratch, at(landing(r, p, R), k)}, 0));
    }
  std::vector<int32_t> reduced(static_cast<size_t>(K));  // the reduce slot that finishes piece k
  for (int k = 0; k < K; ++k) {
    const BufferRange mine{Buffer::Output, at(r, k)};
    if (!in_place) reduce.slots.push_back(make_slot(Primitive::Copy, -1, -1, {Buffer::Input, at(r, k)}, mine, 0));
    for (int j = 1; j < R; ++j) {
      // rs_recv's slot from rank r - j for piece k landed in scratch slot (landing, k).
      const int p = mod(r - j, R);
      Slot s = make_slot(Primitive::Reduce, -1, -1, {Buffer::Scratch, at(landing(r, p, R), k)}, mine, 0);
      s.deps.push_back(SlotDep{1, k * (R - 1) + j - 1});
      reduce.slots.push_back(s);
    }
    reduced[static_cast<size_t>(k)] = static_cast<int32_t>(reduce.slots.size()) - 1;
  }
  for (int k = 0; k < K; ++k)
    for (int j = 1; j < R; ++j) {
      Slot s = make_slot(Primitive::Send, mod(r + j, R), -1, {Buffer::Output, at(r, k)}, {}, 1);
      if (j == 1) s.deps.push_back(SlotDep{2, reduced[static_cast<size_t>(k)]});
      ag_send.slots.push_back(s);
    }
  for (int k = 0; k < K; ++k)
    for (int j = 1; j < R; ++j) {
      const int p = mod(r - j, R);
      Slot s = make_slot(Primitive::Recv, -1, p, {}, {Buffer::Output, at(p, k)}, 1);
      // In place, this output slot is the input slot the reduce-scatter sends to p.
      s.deps.push_back(SlotDep{0, k * (R - 1) + mod(p - r, R) - 1});
      ag_recv.slots.push_back(s);
    }
  rp.tbs = {rs_send, rs_recv, reduce, ag_send, ag_recv};
}

}  // namespace

bool supports(Collective c) { return c == Collective::AllGather || c == Collective::AllReduce; }

Plan ce_plan(Collective c, int nranks, bool in_place, int pieces) {
  if (!supports(c))
    fail(ErrorCode::InvalidArgument, std::string("copy-engine plans exist for AllGather and AllReduce, not ") +
                                         std::string(to_string(c)));
  if (nranks < 2 || nranks > kMaxRanks)
    fail(ErrorCode::InvalidArgument, "copy-engine plans run 2 to " + std::to_string(kMaxRanks) + " ranks (got " +
                                         std::to_string(nranks) + ")");
  if (pieces < 1 || pieces > kMaxPieces || (c == Collective::AllGather && pieces != 1))
    fail(ErrorCode::InvalidArgument, "copy-engine plans cut AllReduce into 1 to " + std::to_string(kMaxPieces) +
                                         " pieces, AllGather into 1 (got " + std::to_string(pieces) + ")");
  Plan p;
  p.algorithm = std::string(kAlgorithm) + "_" + (c == Collective::AllGather ? "allgather" : "allreduce");
  p.collective = c;
  p.num_ranks = nranks;
  p.in_place = in_place;
  p.protocol = "Simple";
  p.scheduler = "hand-built";
  p.allocator = "ce";
  const bool ag = c == Collective::AllGather;
  p.input_chunks = ag ? 1 : nranks * pieces;
  p.output_chunks = nranks * pieces;
  p.scratch_chunks = ag ? 0 : (nranks - 1) * pieces;
  for (int r = 0; r < nranks; ++r) {
    RankPlan rp;
    rp.rank = r;
    if (ag) allgather_rank(rp, nranks, in_place);
    else allreduce_rank(rp, nranks, in_place, pieces);
    p.ranks.push_back(std::move(rp));
  }
  for (int s = 0; s < nranks; ++s)
    for (int d = 0; d < nranks; ++d)
      if (s != d) p.links.push_back(PlanLink{s, d, ChannelKind::PortCopyEngine});
  validate_plan(p);
  return p;
}

std::string_view to_string(StepOp op) {
  switch (op) {
    case StepOp::Signal: return "signal";
    case StepOp::Wait: return "wait";
    case StepOp::Put: return "put";
    case StepOp::Copy: return "copy";
    case StepOp::Reduce: return "reduce";
    case StepOp::Flush: return "flush";
  }
  return "?";
}

std::string describe(const Step& s) {
  auto range = [&](const BufferRange& b) {
    const char* n = b.buffer == Buffer::Input ? "in" : b.buffer == Buffer::Output ? "out" : "scratch";
    return std::string(n) + "[" + std::to_string(b.index) + ".." + std::to_string(b.index + s.count) + ")";
  };
  const std::string peer = "rank " + std::to_string(s.peer);
  switch (s.op) {
    case StepOp::Signal: return "signal " + peer;
    case StepOp::Wait: return "wait " + peer;
    case StepOp::Put: return "put " + range(s.src) + " -> " + peer + " " + range(s.dst);
    case StepOp::Copy: return "copy " + range(s.src) + " -> " + range(s.dst);
    case StepOp::Reduce: return "reduce " + range(s.src) + " into " + range(s.dst);
    case StepOp::Flush: return "flush";
  }
  return "?";
}

namespace {

/// One rank's program from its slots: the order of steps on this rank, and the order of
/// signal-carrying steps toward each peer and of waits from it (-1 for the ready
/// handshake, else the Send slot's id), which lower_ce_plan checks across ranks.
class RankLowering {
 public:
  RankLowering(const PlanIndex& ix, const PlanPairing& pairing, const std::string& who, int rank, int nranks)
      : ix_(ix), pairing_(pairing), who_(who), r_(rank), signals_(static_cast<size_t>(nranks)),
        waits_(static_cast<size_t>(nranks)), ready_from_(static_cast<size_t>(nranks), 0) {
    tb0_ = ix.rank_tb[static_cast<size_t>(rank)];
    tb1_ = ix.rank_tb[static_cast<size_t>(rank) + 1];
    first_ = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(tb0_)]);
    last_ = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(tb1_)]);
    next_.resize(static_cast<size_t>(tb1_ - tb0_));
    for (int32_t t = tb0_; t < tb1_; ++t) next_[static_cast<size_t>(t - tb0_)] = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(t)]);
    done_.assign(static_cast<size_t>(last_ - first_), 0);
  }

  std::vector<Step> lower() {
    check_and_handshake();
    schedule();
    if (std::any_of(prog_.begin(), prog_.end(), [](const Step& x) { return x.op == StepOp::Put; }))
      prog_.push_back(Step{StepOp::Flush, -1, {}, {}, 1});
    return std::move(prog_);
  }
  const std::vector<std::vector<int32_t>>& signals() const { return signals_; }
  const std::vector<std::vector<int32_t>>& waits() const { return waits_; }

 private:
  bool is_done(int32_t id) const { return done_[static_cast<size_t>(id - first_)] != 0; }
  Primitive prim(int32_t id) const { return ix_.slot(id).primitive; }
  bool local(int32_t id) const { return prim(id) != Primitive::Send && prim(id) != Primitive::Recv; }
  bool ready(int32_t id) const {
    if (!ix_.first_in_tb(id) && !is_done(id - 1)) return false;
    for (const SlotDep& d : ix_.slot(id).deps)
      if (!is_done(ix_.dep(id, d))) return false;
    return true;
  }

  /// Refuses what the copy-engine runner cannot run, and starts with the ready handshake:
  /// tell every peer this rank receives from that its buffers may be written.
  void check_and_handshake() {
    for (int32_t id = first_; id < last_; ++id) {
      const Slot& s = ix_.slot(id);
      if (s.instances != 1)
        fail(ErrorCode::InvalidUsage, who_ + ": " + describe(slot_ref(ix_, id)) + " has " + std::to_string(s.instances) +
                                          " instances; the copy-engine runner runs one");
      switch (s.primitive) {
        case Primitive::Send: case Primitive::Recv: case Primitive::Copy: case Primitive::Reduce: case Primitive::Nop: break;
        default:
          fail(ErrorCode::InvalidUsage, who_ + ": " + describe(slot_ref(ix_, id)) + " is a fused primitive (" +
                                            std::string(to_string(s.primitive)) +
                                            "); the copy-engine runner runs send, recv, copy and reduce only");
      }
      if (s.primitive == Primitive::Recv && std::none_of(prog_.begin(), prog_.end(), [&](const Step& x) {
            return x.op == StepOp::Signal && x.peer == s.recv_peer;
          })) {
        prog_.push_back(Step{StepOp::Signal, s.recv_peer, {}, {}, 1});
        signals_[static_cast<size_t>(s.recv_peer)].push_back(-1);
      }
    }
  }

  void emit(int32_t id) {
    const Slot& s = ix_.slot(id);
    done_[static_cast<size_t>(id - first_)] = 1;
    ++next_[static_cast<size_t>(ix_.tb_of[static_cast<size_t>(id)] - tb0_)];
    switch (s.primitive) {
      case Primitive::Send: {
        const int32_t recv = [&] {
          for (const PlanConnection& c : pairing_.conns)
            for (size_t i = 0; i < c.sends.size(); ++i)
              if (c.sends[i] == id) return c.recvs[i];
          return -1;
        }();
        if (recv < 0) fail(ErrorCode::Internal, who_ + ": " + describe(slot_ref(ix_, id)) + " has no receive");
        const int q = s.send_peer;
        if (!ready_from_[static_cast<size_t>(q)]) {
          ready_from_[static_cast<size_t>(q)] = 1;
          prog_.push_back(Step{StepOp::Wait, q, {}, {}, 1});
          waits_[static_cast<size_t>(q)].push_back(-1);
        }
        prog_.push_back(Step{StepOp::Put, q, s.src, ix_.slot(recv).dst, s.count});
        signals_[static_cast<size_t>(q)].push_back(id);
        break;
      }
      case Primitive::Recv:
        prog_.push_back(Step{StepOp::Wait, s.recv_peer, {}, {}, 1});
        waits_[static_cast<size_t>(s.recv_peer)].push_back(pairing_.send_of[static_cast<size_t>(id)]);
        break;
      case Primitive::Copy: prog_.push_back(Step{StepOp::Copy, -1, s.src, s.dst, s.count}); break;
      case Primitive::Reduce: prog_.push_back(Step{StepOp::Reduce, -1, s.src, s.dst, s.count}); break;
      default: break;
    }
  }

  /// Emits every ready slot of the kinds `want` accepts, repeatedly (`once`: the first
  /// only); true if any.
  template <typename Want>
  bool sweep(Want want, bool once = false) {
    bool any = false;
    for (bool again = true; again;) {
      again = false;
      for (int32_t t = tb0_; t < tb1_; ++t) {
        const int32_t id = next_[static_cast<size_t>(t - tb0_)];
        if (id >= static_cast<int32_t>(ix_.tb_base[static_cast<size_t>(t) + 1]) || !ready(id) || !want(id)) continue;
        emit(id);
        again = any = true;
        if (once) return true;
      }
    }
    return any;
  }

  /// A local step that reduces into the same chunk as the ones after it in its thread block
  /// waits until all of their operands are there, so that the run is one pass
  /// (dst := a (op) b (op) ...) rather than a pass per operand.
  bool deferred(int32_t id) const {
    const BufferRange dst = ix_.slot(id).dst;
    for (int32_t n = id; !ix_.last_in_tb(n);) {
      ++n;
      if (prim(n) != Primitive::Reduce || !(ix_.slot(n).dst == dst)) break;
      for (const SlotDep& d : ix_.slot(n).deps)
        if (!is_done(ix_.dep(n, d))) return true;
    }
    return false;
  }

  /// The slots not done that some later send or local step needs (through deps or its
  /// thread block), receives included.
  std::vector<char> needed() const {
    std::vector<char> need(done_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      auto mark = [&](int32_t id) {
        char& n = need[static_cast<size_t>(id - first_)];
        changed |= n == 0;
        n = 1;
      };
      for (int32_t id = last_ - 1; id >= first_; --id) {
        if (is_done(id) || (prim(id) == Primitive::Recv && !need[static_cast<size_t>(id - first_)])) continue;
        if (!ix_.first_in_tb(id) && !need[static_cast<size_t>(id - 1 - first_)]) mark(id - 1);
        for (const SlotDep& d : ix_.slot(id).deps)
          if (!need[static_cast<size_t>(ix_.dep(id, d) - first_)]) mark(ix_.dep(id, d));
      }
    }
    return need;
  }

  /// Sends as soon as they can go, local steps as soon as their data is there, one needed
  /// receive at a time (so that local work on what has arrived overlaps what is coming),
  /// the receives nothing here depends on last.
  void schedule() {
    for (int32_t left = last_ - first_; left > 0; left = static_cast<int32_t>(std::count(done_.begin(), done_.end(), 0))) {
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Send; })) continue;
      if (sweep([&](int32_t id) { return local(id) && !deferred(id); })) continue;
      const std::vector<char> need = needed();
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Recv && need[static_cast<size_t>(id - first_)]; }, true))
        continue;
      if (sweep([&](int32_t id) { return local(id); })) continue;
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Recv; })) continue;
      fail(ErrorCode::InvalidUsage, who_ + ": rank " + std::to_string(r_) + "'s slots wait on each other (a cycle)");
    }
  }

  const PlanIndex& ix_;
  const PlanPairing& pairing_;
  const std::string& who_;
  int r_;
  int32_t tb0_ = 0, tb1_ = 0, first_ = 0, last_ = 0;
  std::vector<int32_t> next_;  ///< per thread block of the rank: its next slot to emit
  std::vector<char> done_;     ///< per slot of the rank
  std::vector<Step> prog_;
  std::vector<std::vector<int32_t>> signals_, waits_;  ///< by peer
  std::vector<char> ready_from_;                       ///< by peer: its ready signal waited for
};

}  // namespace

std::vector<std::vector<Step>> lower_ce_plan(const Plan& plan) {
  validate_plan(plan);
  const std::string who = "copy-engine runner, plan '" + plan.algorithm + "'";
  if (plan.links.empty())
    fail(ErrorCode::InvalidUsage, who + ": the plan records no links; it runs only plans whose links are port-ce");
  for (const PlanLink& l : plan.links)
    if (l.channel != ChannelKind::PortCopyEngine)
      fail(ErrorCode::InvalidUsage, who + ": link " + std::to_string(l.src) + " -> " + std::to_string(l.dst) + " is " +
                                        std::string(to_string(l.channel)) + ", not port-ce");
  const PlanIndex ix(plan);
  const PlanPairing pairing = pair_connections_or_throw(plan, ix);
  const int R = plan.num_ranks;
  std::vector<std::vector<Step>> programs(static_cast<size_t>(R));
  std::vector<std::vector<std::vector<int32_t>>> signals(static_cast<size_t>(R)), waits(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    RankLowering rl(ix, pairing, who, r, R);
    programs[static_cast<size_t>(r)] = rl.lower();
    signals[static_cast<size_t>(r)] = rl.signals();
    waits[static_cast<size_t>(r)] = rl.waits();
  }
  // One counter per ordered pair carries the ready signal and the puts' signals: the waits
  // at the receiving end must expect them in the order the sender posts them.
  for (int q = 0; q < R; ++q)
    for (int r = 0; r < R; ++r)
      if (signals[static_cast<size_t>(q)][static_cast<size_t>(r)] != waits[static_cast<size_t>(r)][static_cast<size_t>(q)])
        fail(ErrorCode::InvalidUsage, who + ": rank " + std::to_string(q) + " signals rank " + std::to_string(r) +
                                          " in another order than rank " + std::to_string(r) +
                                          " waits for it; the copy-engine runner carries them on one counter");
  return programs;
}

uint64_t Geometry::length(const BufferRange& b, int32_t count) const {
  const uint64_t t = total[static_cast<size_t>(b.buffer)];
  const uint64_t lo = std::min(t, offset(b)), hi = std::min(t, offset(b) + static_cast<uint64_t>(count) * chunk);
  return hi - lo;
}

Geometry make_geometry(Collective c, int nranks, uint64_t count, uint64_t elem_size, uint64_t piece_bytes) {
  Geometry g;
  const uint64_t R = static_cast<uint64_t>(nranks), bytes = count * elem_size;
  if (c == Collective::AllGather) {
    g.chunk = bytes;
    g.total[0] = bytes;
    g.total[1] = bytes * R;
  } else {
    // Pieces of kPieceBytes or more per rank's part, so that copies overlap the reduction.
    const uint64_t part = (count + R - 1) / R * elem_size;
    g.pieces = static_cast<int>(std::clamp<uint64_t>(part / std::max<uint64_t>(piece_bytes, 1), 1, kMaxPieces));
    const uint64_t slots = R * static_cast<uint64_t>(g.pieces);
    g.chunk = ((count + slots - 1) / slots * elem_size + 15) / 16 * 16;
    g.total[0] = g.total[1] = bytes;
    g.total[2] = g.chunk * (R - 1) * static_cast<uint64_t>(g.pieces);
  }
  return g;
}

int covering_mapping(const std::vector<PeerMapping>& maps, int peer, uint64_t address, uint64_t bytes) {
  for (size_t k = maps.size(); k-- > 0;) {
    const PeerMapping& m = maps[k];
    if (m.peer != peer) continue;
    // Unsigned arithmetic wraps; address spaces lie far below 2^63, so a wrapped result
    // falls outside the range and is refused.
    const uint64_t here = m.local + (address - m.peer_address);
    if (here < m.local_base || here - m.local_base > m.local_bytes) continue;
    if (bytes <= m.local_bytes - (here - m.local_base)) return static_cast<int>(k);
  }
  return -1;
}

std::vector<size_t> stale_mappings(const std::vector<PeerMapping>& maps, int peer, uint64_t address, uint64_t bytes) {
  std::vector<size_t> out;
  for (size_t k = 0; k < maps.size(); ++k) {
    const PeerMapping& m = maps[k];
    if (m.peer == peer && address < m.peer_address + m.peer_bytes && m.peer_address < address + bytes) out.push_back(k);
  }
  return out;
}

}  // namespace weft::ce
