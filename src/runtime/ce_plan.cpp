#include "runtime/ce_plan.hpp"

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

bool supports(Collective c) { return c == Collective::AllReduce || direct(c); }

bool direct(Collective c) {
  return c == Collective::AllGather || c == Collective::AllToAll || c == Collective::Broadcast;
}

Plan ce_plan(Collective c, int nranks, bool in_place, int pieces) {
  if (c != Collective::AllGather && c != Collective::AllReduce)
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

std::vector<std::vector<Step>> lower_ce_plan(const Plan& plan) {
  validate_plan(plan);
  const std::string who = "copy-engine executor, plan '" + plan.algorithm + "'";
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
  // Per rank, the order of signal-carrying steps toward each peer and of waits from it:
  // -1 for the ready handshake, else the Send slot's id.
  std::vector<std::vector<std::vector<int32_t>>> signals(static_cast<size_t>(R)), waits(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    signals[static_cast<size_t>(r)].resize(static_cast<size_t>(R));
    waits[static_cast<size_t>(r)].resize(static_cast<size_t>(R));
    const int32_t tb0 = ix.rank_tb[static_cast<size_t>(r)], tb1 = ix.rank_tb[static_cast<size_t>(r) + 1];
    const int32_t first = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(tb0)]);
    const int32_t last = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(tb1)]);
    std::vector<int32_t> next(static_cast<size_t>(tb1 - tb0));
    for (int32_t t = tb0; t < tb1; ++t) next[static_cast<size_t>(t - tb0)] = static_cast<int32_t>(ix.tb_base[static_cast<size_t>(t)]);
    std::vector<char> done(static_cast<size_t>(last - first), 0);
    auto is_done = [&](int32_t id) { return done[static_cast<size_t>(id - first)] != 0; };
    auto ready = [&](int32_t id) {
      if (!ix.first_in_tb(id) && !is_done(id - 1)) return false;
      for (const SlotDep& d : ix.slot(id).deps)
        if (!is_done(ix.dep(id, d))) return false;
      return true;
    };
    std::vector<Step>& prog = programs[static_cast<size_t>(r)];
    std::vector<char> ready_from(static_cast<size_t>(R), 0);  // the peer's ready signal waited for
    for (int32_t id = first; id < last; ++id) {
      const Slot& s = ix.slot(id);
      if (s.instances != 1)
        fail(ErrorCode::InvalidUsage, who + ": " + describe(slot_ref(ix, id)) + " has " + std::to_string(s.instances) +
                                          " instances; the copy-engine executor runs one");
      switch (s.primitive) {
        case Primitive::Send: case Primitive::Recv: case Primitive::Copy: case Primitive::Reduce: case Primitive::Nop: break;
        default:
          fail(ErrorCode::InvalidUsage, who + ": " + describe(slot_ref(ix, id)) + " is a fused primitive (" +
                                            std::string(to_string(s.primitive)) +
                                            "); the copy-engine executor runs send, recv, copy and reduce only");
      }
      // Ready handshake: tell every peer this rank receives from that its buffers may be written.
      if (s.primitive == Primitive::Recv && std::none_of(prog.begin(), prog.end(), [&](const Step& x) {
            return x.op == StepOp::Signal && x.peer == s.recv_peer;
          })) {
        prog.push_back(Step{StepOp::Signal, s.recv_peer, {}, {}, 1});
        signals[static_cast<size_t>(r)][static_cast<size_t>(s.recv_peer)].push_back(-1);
      }
    }
    auto emit = [&](int32_t id) {
      const Slot& s = ix.slot(id);
      done[static_cast<size_t>(id - first)] = 1;
      ++next[static_cast<size_t>(ix.tb_of[static_cast<size_t>(id)] - tb0)];
      switch (s.primitive) {
        case Primitive::Send: {
          const int32_t recv = [&] {
            for (const PlanConnection& c : pairing.conns)
              for (size_t i = 0; i < c.sends.size(); ++i)
                if (c.sends[i] == id) return c.recvs[i];
            return -1;
          }();
          if (recv < 0) fail(ErrorCode::Internal, who + ": " + describe(slot_ref(ix, id)) + " has no receive");
          const int q = s.send_peer;
          if (!ready_from[static_cast<size_t>(q)]) {
            ready_from[static_cast<size_t>(q)] = 1;
            prog.push_back(Step{StepOp::Wait, q, {}, {}, 1});
            waits[static_cast<size_t>(r)][static_cast<size_t>(q)].push_back(-1);
          }
          prog.push_back(Step{StepOp::Put, q, s.src, ix.slot(recv).dst, s.count});
          signals[static_cast<size_t>(r)][static_cast<size_t>(q)].push_back(id);
          break;
        }
        case Primitive::Recv:
          prog.push_back(Step{StepOp::Wait, s.recv_peer, {}, {}, 1});
          waits[static_cast<size_t>(r)][static_cast<size_t>(s.recv_peer)].push_back(pairing.send_of[static_cast<size_t>(id)]);
          break;
        case Primitive::Copy: prog.push_back(Step{StepOp::Copy, -1, s.src, s.dst, s.count}); break;
        case Primitive::Reduce: prog.push_back(Step{StepOp::Reduce, -1, s.src, s.dst, s.count}); break;
        default: break;
      }
    };
    // Emits every ready slot of the kinds `want` accepts, repeatedly (`once`: the first
    // only); true if any.
    auto sweep = [&](auto want, bool once = false) {
      bool any = false;
      for (bool again = true; again;) {
        again = false;
        for (int32_t t = tb0; t < tb1; ++t) {
          const int32_t id = next[static_cast<size_t>(t - tb0)];
          if (id >= static_cast<int32_t>(ix.tb_base[static_cast<size_t>(t) + 1]) || !ready(id) || !want(id)) continue;
          emit(id);
          again = any = true;
          if (once) return true;
        }
      }
      return any;
    };
    auto prim = [&](int32_t id) { return ix.slot(id).primitive; };
    auto local = [&](int32_t id) { return prim(id) != Primitive::Send && prim(id) != Primitive::Recv; };
    // A local step that reduces into the same chunk as the ones after it in its thread block
    // waits until all of their operands are there, so that the run is one pass
    // (dst := a (op) b (op) ...) rather than a pass per operand.
    auto deferred = [&](int32_t id) {
      const BufferRange dst = ix.slot(id).dst;
      for (int32_t n = id; !ix.last_in_tb(n);) {
        ++n;
        if (prim(n) != Primitive::Reduce || !(ix.slot(n).dst == dst)) break;
        for (const SlotDep& d : ix.slot(n).deps)
          if (!is_done(ix.dep(n, d))) return true;
      }
      return false;
    };
    // Sends as soon as they can go, local steps as soon as their data is there, one needed
    // receive at a time (so that local work on what has arrived overlaps what is coming),
    // the receives nothing here depends on last.
    for (int32_t left = last - first; left > 0; left = static_cast<int32_t>(std::count(done.begin(), done.end(), 0))) {
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Send; })) continue;
      if (sweep([&](int32_t id) { return local(id) && !deferred(id); })) continue;
      // Receives some later send or local step needs (through deps or its thread block).
      std::vector<char> needed(done.size(), 0);
      for (bool changed = true; changed;) {
        changed = false;
        auto mark = [&](int32_t id) {
          char& n = needed[static_cast<size_t>(id - first)];
          changed |= n == 0;
          n = 1;
        };
        for (int32_t id = last - 1; id >= first; --id) {
          if (is_done(id) || (prim(id) == Primitive::Recv && !needed[static_cast<size_t>(id - first)])) continue;
          if (!ix.first_in_tb(id) && !needed[static_cast<size_t>(id - 1 - first)]) mark(id - 1);
          for (const SlotDep& d : ix.slot(id).deps)
            if (!needed[static_cast<size_t>(ix.dep(id, d) - first)]) mark(ix.dep(id, d));
        }
      }
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Recv && needed[static_cast<size_t>(id - first)]; }, true))
        continue;
      if (sweep(local)) continue;
      if (sweep([&](int32_t id) { return prim(id) == Primitive::Recv; })) continue;
      fail(ErrorCode::InvalidUsage, who + ": rank " + std::to_string(r) + "'s slots wait on each other (a cycle)");
    }
    if (std::any_of(prog.begin(), prog.end(), [](const Step& x) { return x.op == StepOp::Put; }))
      prog.push_back(Step{StepOp::Flush, -1, {}, {}, 1});
  }
  // One counter per ordered pair carries the ready signal and the puts' signals: the waits
  // at the receiving end must expect them in the order the sender posts them.
  for (int q = 0; q < R; ++q)
    for (int r = 0; r < R; ++r)
      if (signals[static_cast<size_t>(q)][static_cast<size_t>(r)] != waits[static_cast<size_t>(r)][static_cast<size_t>(q)])
        fail(ErrorCode::InvalidUsage, who + ": rank " + std::to_string(q) + " signals rank " + std::to_string(r) +
                                          " in another order than rank " + std::to_string(r) +
                                          " waits for it; the copy-engine executor carries them on one counter");
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
