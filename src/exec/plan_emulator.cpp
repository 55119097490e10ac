#include "exec/plan_emulator.hpp"

#include <cstring>
#include <deque>
#include <map>
#include <tuple>

#include "exec/host_reduce.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

using Message = std::vector<uint8_t>;

struct TBState {
  int32_t slot = 0;  ///< index within the thread block
  uint32_t mb = 0;
  bool done = false;
};

/// Lane `lane8` of a line carries 16 data bytes, lane 7 eight (then the flag).
uint32_t ll128_lane_data(uint32_t lane8) { return lane8 == 7 ? 8u : 16u; }

/// A message's pieces (each `piece` data bytes apart, `wire` bytes of them on the wire) as
/// LL128 lines with `flag`, laid out as the interpreter's move_ll128 writes them.
Message ll128_encode(const Message& data, int count, uint64_t piece, uint64_t wire, uint64_t flag) {
  const uint64_t lines = device::ll128_lines(wire), stride = device::ll128_buffer_bytes(piece);
  Message out(static_cast<size_t>(count) * stride, 0);
  for (int c = 0; c < count; ++c) {
    const uint8_t* d = data.data() + static_cast<size_t>(c) * piece;
    uint8_t* o = out.data() + static_cast<size_t>(c) * stride;
    for (uint64_t l = 0; l < lines; ++l)
      for (uint32_t j = 0; j < 8; ++j) {
        const uint64_t off = device::ll128_data_offset(l, j);
        for (uint32_t b = 0; b < ll128_lane_data(j) && off + b < wire; ++b)
          o[device::ll128_line_offset(l, j) + b] = d[off + b];
      }
    for (uint64_t l = 0; l < lines; ++l) std::memcpy(o + device::ll128_line_offset(l, 7) + 8, &flag, 8);
  }
  return out;
}

/// The data of an LL128 message (ll128_encode's inverse); fails naming the first line whose
/// flag is not `flag`.
Message ll128_decode(const Message& wire_msg, int count, uint64_t piece, uint64_t wire, uint64_t flag,
                     const std::string& where) {
  const uint64_t lines = device::ll128_lines(wire), stride = device::ll128_buffer_bytes(piece);
  if (wire_msg.size() != static_cast<size_t>(count) * stride)
    fail(ErrorCode::Internal, "emulate: " + where + ": an LL128 message of " + std::to_string(wire_msg.size()) +
                                  " bytes, the receiver expects " + std::to_string(static_cast<uint64_t>(count) * stride));
  Message data(static_cast<size_t>(count) * piece, 0);
  for (int c = 0; c < count; ++c) {
    const uint8_t* w = wire_msg.data() + static_cast<size_t>(c) * stride;
    uint8_t* d = data.data() + static_cast<size_t>(c) * piece;
    for (uint64_t l = 0; l < lines; ++l) {
      uint64_t f = 0;
      std::memcpy(&f, w + device::ll128_line_offset(l, 7) + 8, 8);
      if (f != flag)
        fail(ErrorCode::Internal, "emulate: " + where + ": LL128 piece " + std::to_string(c) + ", line " +
                                      std::to_string(l) + " has flag " + std::to_string(f) + ", expected " +
                                      std::to_string(flag));
      for (uint32_t j = 0; j < 8; ++j) {
        const uint64_t off = device::ll128_data_offset(l, j);
        for (uint32_t b = 0; b < ll128_lane_data(j) && off + b < wire; ++b)
          d[off + b] = w[device::ll128_line_offset(l, j) + b];
      }
    }
  }
  return data;
}

}  // namespace

EmuResult emulate(const LoweredPlan& lp, const exec::Geometry& g, int depth, std::vector<EmuBuffers>& bufs,
                  int dtype, int op, exec::Protocol protocol) {
  const int R = static_cast<int>(lp.ranks.size());
  if (static_cast<int>(bufs.size()) != R) fail(ErrorCode::InvalidArgument, "emulate: one EmuBuffers per rank needed");
  const uint32_t esz = g.elem_size;
  const bool algo_model = lp.plan.execution == ExecutionModel::Algorithm;
  // FIFOs keyed by (src, dst, pool index).
  std::map<std::tuple<int, int, int>, std::deque<Message>> fifos;
  // LL128: messages sent and received so far per FIFO (the flag's count, as in the kernel).
  std::map<std::pair<std::tuple<int, int, int>, bool>, uint64_t> positions;
  const bool ll128 = protocol == exec::kLL128;
  std::vector<std::vector<uint64_t>> counters(static_cast<size_t>(R));
  std::vector<std::vector<TBState>> state(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    counters[static_cast<size_t>(r)].assign(lp.ranks[static_cast<size_t>(r)].slots.size(), 0);
    state[static_cast<size_t>(r)].resize(lp.ranks[static_cast<size_t>(r)].tbs.size());
    for (size_t t = 0; t < state[static_cast<size_t>(r)].size(); ++t)
      state[static_cast<size_t>(r)][t].done = lp.ranks[static_cast<size_t>(r)].tbs[t].nslots == 0 || g.nmb == 0;
  }
  EmuResult res;
  std::vector<uint8_t> tmp;

  auto fifo_key = [&](int r, const exec::DevSlot& s, bool send) -> std::tuple<int, int, int> {
    const ConnRef& c = lp.ranks[static_cast<size_t>(r)].conns[static_cast<size_t>(send ? s.send_conn : s.recv_conn)];
    return send ? std::tuple{r, c.peer, c.pool_index} : std::tuple{c.peer, r, c.pool_index};
  };
  auto fifo_of = [&](int r, const exec::DevSlot& s, bool send) -> std::deque<Message>& {
    return fifos[fifo_key(r, s, send)];
  };

  // Tries to run invocation (slot, mb) of one thread block; false if it would block.
  auto try_run = [&](int r, int32_t gslot, uint32_t k) -> bool {
    const LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
    const exec::DevSlot& s = lr.slots[static_cast<size_t>(gslot)];
    for (int32_t d = 0; d < s.ndeps; ++d)
      if (counters[static_cast<size_t>(r)][static_cast<size_t>(lr.deps[static_cast<size_t>(s.dep_begin + d)])] < k + 1)
        return false;
    const bool sends = exec::prim_sends(s.prim), recvs = exec::prim_receives(s.prim);
    if (recvs && fifo_of(r, s, false).empty()) return false;
    if (sends && static_cast<int>(fifo_of(r, s, true).size()) >= depth) return false;

    const uint64_t part = exec::part_elems(g, s.instances);
    const exec::Range prg = exec::piece_range(g, k, s.instance, s.instances);
    const uint64_t wire = prg.hi > prg.lo ? (prg.hi - prg.lo) * esz : 0;  // every line of a piece travels
    Message in;
    if (recvs) {
      in = std::move(fifo_of(r, s, false).front());
      fifo_of(r, s, false).pop_front();
      if (ll128)
        in = ll128_decode(in, s.count, part * esz, wire, device::ll128_flag(positions[{fifo_key(r, s, false), false}]++),
                          "rank " + std::to_string(r) + ", slot " + std::to_string(gslot) + ", micro-batch " +
                              std::to_string(k));
    }
    Message out;
    if (sends) out.assign(static_cast<size_t>(s.count) * part * esz, 0);
    uint8_t* const* b = bufs[static_cast<size_t>(r)].buf;
    for (int c = 0; c < s.count; ++c) {
      exec::Range rg = exec::piece_range(g, k, s.instance, s.instances);
      uint64_t n = exec::piece_valid(g, s, c, rg);
      if (n == 0) continue;
      const size_t bytes = n * esz;
      uint8_t* src = exec::prim_reads_src(s.prim)
                         ? b[s.src_buf] + (exec::chunk_offset(g, s.src_buf, s.src_index + c) + rg.lo) * esz
                         : nullptr;
      uint8_t* dst = exec::prim_writes_dst(s.prim)
                         ? b[s.dst_buf] + (exec::chunk_offset(g, s.dst_buf, s.dst_index + c) + rg.lo) * esz
                         : nullptr;
      const uint8_t* inp = recvs ? in.data() + static_cast<size_t>(c) * part * esz : nullptr;
      uint8_t* outp = sends ? out.data() + static_cast<size_t>(c) * part * esz : nullptr;
      if ((src == nullptr && exec::prim_reads_src(s.prim)) || (dst == nullptr && exec::prim_writes_dst(s.prim)))
        fail(ErrorCode::Internal, "emulate: a buffer the plan uses is missing");
      tmp.resize(bytes);
      switch (s.prim) {
        case exec::kSend: std::memcpy(outp, src, bytes); break;
        case exec::kRecv: std::memcpy(dst, inp, bytes); break;
        case exec::kRecvReduceCopy: host::combine(dtype, op, dst, src, inp, n); break;
        case exec::kRecvCopySend:
          std::memcpy(dst, inp, bytes);
          std::memcpy(outp, inp, bytes);
          break;
        case exec::kRecvReduceCopySend:
          host::combine(dtype, op, tmp.data(), src, inp, n);
          std::memcpy(dst, tmp.data(), bytes);
          std::memcpy(outp, tmp.data(), bytes);
          break;
        case exec::kRecvReduceSend: host::combine(dtype, op, outp, src, inp, n); break;
        case exec::kCopy: std::memmove(dst, src, bytes); break;
        case exec::kReduce: host::combine(dtype, op, dst, dst, src, n); break;
        default: break;
      }
    }
    if (recvs) ++res.messages;
    if (sends && ll128)
      out = ll128_encode(out, s.count, part * esz, wire, device::ll128_flag(positions[{fifo_key(r, s, true), true}]++));
    if (sends) fifo_of(r, s, true).push_back(std::move(out));
    counters[static_cast<size_t>(r)][static_cast<size_t>(gslot)] = k + 1;
    ++res.invocations;
    return true;
  };

  for (;;) {
    bool progress = false, all_done = true;
    for (int r = 0; r < R; ++r) {
      const LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
      for (size_t t = 0; t < lr.tbs.size(); ++t) {
        TBState& st = state[static_cast<size_t>(r)][t];
        // Run as far as this thread block can go before looking at the next one.
        while (!st.done && try_run(r, lr.tbs[t].slot_begin + st.slot, st.mb)) {
          progress = true;
          if (algo_model) {
            if (++st.slot == lr.tbs[t].nslots) {
              st.slot = 0;
              if (++st.mb == g.nmb) st.done = true;
            }
          } else {
            if (++st.mb == g.nmb) {
              st.mb = 0;
              if (++st.slot == lr.tbs[t].nslots) st.done = true;
            }
          }
        }
        all_done &= st.done;
      }
    }
    if (all_done) break;
    if (!progress) {
      res.ok = false;
      std::string blocked;
      int shown = 0;
      for (int r = 0; r < R && shown < 8; ++r)
        for (size_t t = 0; t < state[static_cast<size_t>(r)].size() && shown < 8; ++t) {
          const TBState& st = state[static_cast<size_t>(r)][t];
          if (st.done) continue;
          blocked += (blocked.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " thread block " +
                     std::to_string(t) + " at slot " + std::to_string(st.slot) + ", micro-batch " +
                     std::to_string(st.mb);
          ++shown;
        }
      res.error = "plan '" + lp.plan.algorithm + "' deadlocks with FIFOs of " + std::to_string(depth) +
                  " messages and " + std::to_string(g.nmb) + " micro-batches: " + blocked;
      res.deadlock.ok = false;
      res.deadlock.message = res.error;
      const PlanIndex ix(lp.plan);
      for (int r = 0; r < R; ++r)
        for (size_t t = 0; t < state[static_cast<size_t>(r)].size(); ++t)
          if (!state[static_cast<size_t>(r)][t].done)
            res.deadlock.cycle.push_back(slot_ref(ix, ix.id(r, static_cast<int32_t>(t), state[static_cast<size_t>(r)][t].slot)));
      return res;
    }
  }
  for (const auto& [key, q] : fifos)
    if (!q.empty()) {
      res.ok = false;
      res.error = "plan '" + lp.plan.algorithm + "' leaves " + std::to_string(q.size()) + " unread messages on " +
                  std::to_string(std::get<0>(key)) + "->" + std::to_string(std::get<1>(key));
    }
  return res;
}

}  // namespace weft
