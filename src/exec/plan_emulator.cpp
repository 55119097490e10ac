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
  exec::InvocationOrder at;  ///< the next invocation (slot within the thread block, micro-batch)
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

using FifoKey = std::tuple<int, int, int>;  ///< (src, dst, pool index)

/// One run of emulate(): every rank's FIFOs, counters and thread blocks' positions.
class Emulator {
 public:
  Emulator(const LoweredPlan& lp, const exec::Geometry& g, int depth, std::vector<EmuBuffers>& bufs, int dtype, int op,
           exec::Protocol protocol, uint32_t mb_window)
      : lp_(lp), g_(g), depth_(depth), bufs_(bufs), dtype_(dtype), op_(op), esz_(g.elem_size),
        ll128_(protocol == exec::kLL128), R_(static_cast<int>(lp.ranks.size())),
        win_(exec::order_window(lp.plan.execution != ExecutionModel::Algorithm, g.nmb, mb_window)) {
    counters_.resize(static_cast<size_t>(R_));
    state_.resize(static_cast<size_t>(R_));
    for (int r = 0; r < R_; ++r) {
      counters_[static_cast<size_t>(r)].assign(lp.ranks[static_cast<size_t>(r)].slots.size(), 0);
      state_[static_cast<size_t>(r)].resize(lp.ranks[static_cast<size_t>(r)].tbs.size());
      for (size_t t = 0; t < state_[static_cast<size_t>(r)].size(); ++t) {
        state_[static_cast<size_t>(r)][t].at = exec::order_begin(g.nmb, win_);
        state_[static_cast<size_t>(r)][t].done = lp.ranks[static_cast<size_t>(r)].tbs[t].nslots == 0 || g.nmb == 0;
      }
    }
  }

  EmuResult run() {
    for (;;) {
      bool progress = false;
      if (sweep(&progress)) break;
      if (!progress) return deadlock();
    }
    for (const auto& [key, q] : fifos_)
      if (!q.empty()) {
        res_.ok = false;
        res_.error = "plan '" + lp_.plan.algorithm + "' leaves " + std::to_string(q.size()) + " unread messages on " +
                     std::to_string(std::get<0>(key)) + "->" + std::to_string(std::get<1>(key));
      }
    return res_;
  }

 private:
  FifoKey fifo_key(int r, const exec::DevSlot& s, bool send) const {
    const ConnRef& c = lp_.ranks[static_cast<size_t>(r)].conns[static_cast<size_t>(send ? s.send_conn : s.recv_conn)];
    return send ? FifoKey{r, c.peer, c.pool_index} : FifoKey{c.peer, r, c.pool_index};
  }
  std::deque<Message>& fifo_of(int r, const exec::DevSlot& s, bool send) { return fifos_[fifo_key(r, s, send)]; }

  /// Runs every thread block as far as it can go, in the kernel's order (exec::InvocationOrder);
  /// true when all are done.
  bool sweep(bool* progress) {
    bool all_done = true;
    for (int r = 0; r < R_; ++r) {
      const LoweredRank& lr = lp_.ranks[static_cast<size_t>(r)];
      for (size_t t = 0; t < lr.tbs.size(); ++t) {
        TBState& st = state_[static_cast<size_t>(r)][t];
        // Run as far as this thread block can go before looking at the next one.
        while (!st.done && try_run(r, lr.tbs[t].slot_begin + st.at.slot, st.at.k)) {
          *progress = true;
          st.done = !exec::order_next(st.at, lr.tbs[t].nslots, g_.nmb, win_);
        }
        all_done &= st.done;
      }
    }
    return all_done;
  }

  /// Tries to run invocation (slot, mb) of one thread block; false if it would block.
  bool try_run(int r, int32_t gslot, uint32_t k) {
    const LoweredRank& lr = lp_.ranks[static_cast<size_t>(r)];
    const exec::DevSlot& s = lr.slots[static_cast<size_t>(gslot)];
    for (int32_t d = 0; d < s.ndeps; ++d)
      if (counters_[static_cast<size_t>(r)][static_cast<size_t>(lr.deps[static_cast<size_t>(s.dep_begin + d)])] < k + 1)
        return false;
    const bool sends = exec::prim_sends(s.prim), recvs = exec::prim_receives(s.prim);
    if (recvs && fifo_of(r, s, false).empty()) return false;
    if (sends && static_cast<int>(fifo_of(r, s, true).size()) >= depth_) return false;

    const uint64_t part = exec::part_elems(g_, s.instances);
    const exec::Range prg = exec::piece_range(g_, k, s.instance, s.instances);
    const uint64_t wire = prg.hi > prg.lo ? (prg.hi - prg.lo) * esz_ : 0;  // every line of a piece travels
    Message in;
    if (recvs) {
      in = std::move(fifo_of(r, s, false).front());
      fifo_of(r, s, false).pop_front();
      if (ll128_)
        in = ll128_decode(in, s.count, part * esz_, wire, device::ll128_flag(positions_[{fifo_key(r, s, false), false}]++),
                          "rank " + std::to_string(r) + ", slot " + std::to_string(gslot) + ", micro-batch " +
                              std::to_string(k));
    }
    Message out;
    if (sends) out.assign(static_cast<size_t>(s.count) * part * esz_, 0);
    for (int c = 0; c < s.count; ++c) move_chunk(r, s, k, c, recvs ? in.data() + static_cast<size_t>(c) * part * esz_ : nullptr,
                                                 sends ? out.data() + static_cast<size_t>(c) * part * esz_ : nullptr);
    if (recvs) ++res_.messages;
    if (sends && ll128_)
      out = ll128_encode(out, s.count, part * esz_, wire, device::ll128_flag(positions_[{fifo_key(r, s, true), true}]++));
    if (sends) fifo_of(r, s, true).push_back(std::move(out));
    counters_[static_cast<size_t>(r)][static_cast<size_t>(gslot)] = k + 1;
    ++res_.invocations;
    return true;
  }

  /// Chunk c of slot s's invocation k on rank r: what the primitive reads, combines and
  /// writes; `inp` is the received part, `outp` where the part to send goes.
  void move_chunk(int r, const exec::DevSlot& s, uint32_t k, int c, const uint8_t* inp, uint8_t* outp) {
    uint8_t* const* b = bufs_[static_cast<size_t>(r)].buf;
    exec::Range rg = exec::piece_range(g_, k, s.instance, s.instances);
    uint64_t n = exec::piece_valid(g_, s, c, rg);
    if (n == 0) return;
    const size_t bytes = n * esz_;
    uint8_t* src = exec::prim_reads_src(s.prim)
                       ? b[s.src_buf] + (exec::chunk_offset(g_, s.src_buf, s.src_index + c) + rg.lo) * esz_
                       : nullptr;
    uint8_t* dst = exec::slot_writes_dst(s)
                       ? b[s.dst_buf] + (exec::chunk_offset(g_, s.dst_buf, s.dst_index + c) + rg.lo) * esz_
                       : nullptr;
    if ((src == nullptr && exec::prim_reads_src(s.prim)) || (dst == nullptr && exec::slot_writes_dst(s)))
      fail(ErrorCode::Internal, "emulate: a buffer the plan uses is missing");
    tmp_.resize(bytes);
    switch (s.prim) {
      case exec::kSend:
        std::memcpy(outp, src, bytes);
        if (dst != nullptr) std::memmove(dst, src, bytes);  // kFusedCopy
        break;
      case exec::kRecv: std::memcpy(dst, inp, bytes); break;
      case exec::kRecvReduceCopy: host::combine(dtype_, op_, dst, src, inp, n); break;
      case exec::kRecvCopySend:
        std::memcpy(dst, inp, bytes);
        std::memcpy(outp, inp, bytes);
        break;
      case exec::kRecvReduceCopySend:
        host::combine(dtype_, op_, tmp_.data(), src, inp, n);
        std::memcpy(dst, tmp_.data(), bytes);
        std::memcpy(outp, tmp_.data(), bytes);
        break;
      case exec::kRecvReduceSend: host::combine(dtype_, op_, outp, src, inp, n); break;
      case exec::kCopy: std::memmove(dst, src, bytes); break;
      case exec::kReduce: host::combine(dtype_, op_, dst, dst, src, n); break;
      default: break;
    }
  }

  /// No thread block can move: the result names the blocked ones.
  EmuResult deadlock() {
    res_.ok = false;
    std::string blocked;
    int shown = 0;
    for (int r = 0; r < R_ && shown < 8; ++r)
      for (size_t t = 0; t < state_[static_cast<size_t>(r)].size() && shown < 8; ++t) {
        const TBState& st = state_[static_cast<size_t>(r)][t];
        if (st.done) continue;
        blocked += (blocked.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " thread block " +
                   std::to_string(t) + " at slot " + std::to_string(st.at.slot) + ", micro-batch " +
                   std::to_string(st.at.k);
        ++shown;
      }
    res_.error = "plan '" + lp_.plan.algorithm + "' deadlocks with FIFOs of " + std::to_string(depth_) +
                 " messages and " + std::to_string(g_.nmb) + " micro-batches" +
                 (win_ > 1 && win_ < g_.nmb ? " in windows of " + std::to_string(win_) : std::string()) + ": " + blocked;
    res_.deadlock.ok = false;
    res_.deadlock.message = res_.error;
    const PlanIndex ix(lp_.plan);
    for (int r = 0; r < R_; ++r)
      for (size_t t = 0; t < state_[static_cast<size_t>(r)].size(); ++t)
        if (!state_[static_cast<size_t>(r)][t].done)
          res_.deadlock.cycle.push_back(slot_ref(ix, ix.id(r, static_cast<int32_t>(t), state_[static_cast<size_t>(r)][t].at.slot)));
    return res_;
  }

  const LoweredPlan& lp_;
  const exec::Geometry& g_;
  const int depth_;
  std::vector<EmuBuffers>& bufs_;
  const int dtype_, op_;
  const uint32_t esz_;
  const bool ll128_;
  const int R_;
  const uint32_t win_;  ///< micro-batches per window (exec::order_window)
  std::map<FifoKey, std::deque<Message>> fifos_;
  /// LL128: messages sent and received so far per FIFO (the flag's count, as in the kernel).
  std::map<std::pair<FifoKey, bool>, uint64_t> positions_;
  std::vector<std::vector<uint64_t>> counters_;
  std::vector<std::vector<TBState>> state_;
  EmuResult res_;
  std::vector<uint8_t> tmp_;
};

}  // namespace

EmuResult emulate(const LoweredPlan& lp, const exec::Geometry& g, int depth, std::vector<EmuBuffers>& bufs,
                  int dtype, int op, exec::Protocol protocol, uint32_t mb_window) {
  if (bufs.size() != lp.ranks.size()) fail(ErrorCode::InvalidArgument, "emulate: one EmuBuffers per rank needed");
  return Emulator(lp, g, depth, bufs, dtype, op, protocol, mb_window).run();
}

}  // namespace weft
