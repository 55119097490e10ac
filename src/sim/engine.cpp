// The discrete-event engine.
//
// State lives in flat arrays indexed by global thread block, slot, connection and resource
// ids (Program numbering). Each thread block has at most one activity in flight (a flow it
// drives, or a timed local step), hence at most one live entry in the event queue; an
// activity that is rescheduled (its flow's rate changed) bumps the block's version and the
// old entry is dropped when popped. Thread blocks that become able to proceed at the
// current instant go on a ready stack, drained after each event, so nothing recurses.
//
// Flows: a flow is registered on the resources of its connection when its invocation
// starts (from then on it counts in their demand, as paper 001 Eq. 1 counts alpha as link
// time) and moves data from `move_from` (start + alpha; for a forwarding primitive, once
// the first byte of its input has arrived). Each resource keeps the sum of the per-TB
// rates of its flows (demand) and a share factor (CostModel::share_factor); a flow runs at
// its per-TB rate times the smallest factor on its path. A start or end changes the demand
// of the flow's own resources only; when a factor changes, the flows on that resource get
// new rates and new completion times. Unsaturated resources never change anyone's rate, so
// a plan whose links are not oversubscribed costs O(log n) per invocation.
#include "sim/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sim/event_queue.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxPath = 4;  // NIC tx, rack uplink, rack downlink, NIC rx

enum class Phase : uint8_t { Ready, WaitDeps, WaitData, WaitCredit, Timed, Flow, Finished };

struct TbState {
  int32_t slot = 0;           // current global slot
  int32_t k = 0;              // current micro-batch
  uint32_t dep_cursor = 0;    // next dependency to check
  Phase phase = Phase::Ready;
  bool deps_done = false;
  bool listed = false;        // on a slot's waiting list
  int32_t next_waiter = -1;   // intrusive list of blocks waiting on one slot's counter
  int32_t wait_value = 0;     // waiting until done[slot] >= wait_value
  uint32_t version = 0;
  // The flow this block drives (phase Flow).
  int32_t nres = 0;
  int32_t res[kMaxPath] = {0, 0, 0, 0};
  int32_t pos[kMaxPath] = {0, 0, 0, 0};  // index in each resource's flow list
  int32_t flow_conn = -1;
  int32_t flow_msg = 0;
  double cap = 0;             // bytes/us
  double rate = 0;            // bytes/us; < 0 while being registered
  double remaining = 0;       // bytes
  double last = 0;            // time `remaining` was last brought up to date
  double move_from = 0;       // data moves from here on
  double not_before = 0;      // forwarding: cannot end before its input's last byte arrived
  // Accounting.
  double arrive = 0;          // when the block reached the current invocation
  double ready = 0;           // when the current invocation's dependencies were met
  double busy_start = 0;
  double busy = 0;
  double finish = 0;
  int64_t invocations = 0;
};

struct ConnState {
  int32_t started = 0;        // messages whose flow has started
  int32_t consumed = 0;       // messages whose receiving invocation has ended
  bool sender_waiting = false;
  bool receiver_waiting = false;
};

struct ResState {
  double cap = 0;             // bytes/us
  double demand = 0;          // bytes/us: sum of the caps of the flows on it
  double factor = 1;
  std::vector<int32_t> flows; // thread blocks whose flow uses it
  int32_t active = 0;
  double since = 0;
  double busy = 0;
  double bytes = 0;
  double max_load = 0;
};

class Engine {
 public:
  Engine(const Program& prog, const CostModel& cost, const EngineParams& params, SimReport& out)
      : p_(prog), cost_(cost), par_(params), out_(out) {}

  void run();

 private:
  // Thread-block stepping.
  void advance(int32_t t);
  void complete(int32_t t);
  void on_event(int32_t t);
  bool try_start_send(int32_t t, int32_t conn, double payload, double move_from, double not_before, double busy_start);
  void schedule_receive(int32_t t);
  void wait_on(int32_t t, int32_t slot, int32_t value);
  void wake(int32_t slot);
  void schedule(int32_t t, double time);
  double payload(const ProgSlot& s, int32_t k) const {
    return s.scale * static_cast<double>(k + 1 < par_.microbatches ? par_.microbatch_bytes : last_mb_);
  }
  size_t ring(int32_t conn, int32_t msg) const {
    return static_cast<size_t>(conn) * static_cast<size_t>(par_.fifo_depth) + static_cast<size_t>(msg % par_.fifo_depth);
  }

  // Flows.
  void start_flow(int32_t t, int32_t conn, double payload, double move_from, double not_before);
  void end_flow(int32_t t);
  void refactor(int32_t r, int32_t skip);
  void update_rate(int32_t t);
  void progress(TbState& s);
  void reschedule_flow(int32_t t);
  void check_load(int32_t r);

  [[noreturn]] void deadlock();

  const Program& p_;
  const CostModel& cost_;
  const EngineParams& par_;
  SimReport& out_;

  double now_ = 0;
  uint64_t last_mb_ = 0;
  std::vector<TbState> tb_;
  std::vector<int32_t> done_;        // per slot: invocations finished
  std::vector<int32_t> waiters_;     // per slot: head of the waiting list
  std::vector<ConnState> conn_;
  std::vector<double> ring_start_;   // per connection x depth: first byte arrives
  std::vector<double> ring_end_;     // last byte arrives (kInf until known)
  std::vector<ResState> res_;
  std::vector<double> local_rate_;   // per rank: bytes/us of one block's local work
  std::vector<int32_t> ready_;
  EventQueue queue_;
  int64_t events_ = 0;
};

void Engine::run() {
  const size_t n_mb = static_cast<size_t>(par_.microbatches);
  last_mb_ = par_.chunk_bytes - (n_mb - 1) * par_.microbatch_bytes;
  tb_.assign(p_.tbs.size(), TbState{});
  done_.assign(p_.slots.size(), 0);
  waiters_.assign(p_.slots.size(), -1);
  conn_.assign(p_.conns.size(), ConnState{});
  ring_start_.assign(p_.conns.size() * static_cast<size_t>(par_.fifo_depth), 0.0);
  ring_end_.assign(ring_start_.size(), kInf);
  res_.resize(p_.resources.size());
  for (size_t r = 0; r < res_.size(); ++r) res_[r].cap = p_.resources[r].capacity_GBps * 1e3;
  // A block's local work runs at its own rate, or at its share of the GPU's HBM if all the
  // rank's blocks worked at once (a static bound: HBM is rarely the limit).
  local_rate_.resize(static_cast<size_t>(p_.num_ranks));
  for (int32_t r = 0; r < p_.num_ranks; ++r) {
    int32_t n = std::max(1, p_.rank_tbs[static_cast<size_t>(r)]);
    local_rate_[static_cast<size_t>(r)] = std::min(cost_.tb_local_GBps, cost_.hbm_GBps / n) * 1e3;
  }
  if (par_.check) {
    out_.inv_count.assign(p_.slots.size() * n_mb, 0);
    out_.inv_ready_us.assign(p_.slots.size() * n_mb, -1.0);
    out_.inv_end_us.assign(p_.slots.size() * n_mb, -1.0);
  }
  queue_.reserve(p_.tbs.size() * 2 + 16);
  ready_.reserve(p_.tbs.size());

  for (size_t t = 0; t < p_.tbs.size(); ++t) {
    TbState& s = tb_[t];
    if (p_.tbs[t].slot_begin == p_.tbs[t].slot_end) {
      s.phase = Phase::Finished;
      continue;
    }
    s.slot = p_.tbs[t].slot_begin;
    s.dep_cursor = p_.slots[static_cast<size_t>(s.slot)].dep_begin;
    ready_.push_back(static_cast<int32_t>(t));
  }
  // Stack order: lower ids first, for readable traces.
  std::reverse(ready_.begin(), ready_.end());
  while (true) {
    while (!ready_.empty()) {
      int32_t t = ready_.back();
      ready_.pop_back();
      advance(t);
    }
    if (queue_.empty()) break;
    Event e = queue_.pop();
    if (e.version != tb_[static_cast<size_t>(e.tb)].version) continue;
    ++events_;
    now_ = e.time;
    on_event(e.tb);
  }

  for (const TbState& s : tb_)
    if (s.phase != Phase::Finished) deadlock();

  // Results.
  double end = 0;
  for (const TbState& s : tb_) end = std::max(end, s.finish);
  out_.time_us = end;
  out_.events = events_;
  out_.tbs.clear();
  for (size_t t = 0; t < p_.tbs.size(); ++t) {
    if (p_.tbs[t].slot_begin == p_.tbs[t].slot_end) continue;
    TbStat st;
    st.rank = p_.tbs[t].rank;
    st.tb = p_.tbs[t].local;
    st.busy_us = tb_[t].busy;
    st.lifetime_us = tb_[t].finish;
    st.invocations = tb_[t].invocations;
    out_.invocations += st.invocations;
    out_.tbs.push_back(st);
  }
  out_.links.clear();
  for (size_t r = 0; r < res_.size(); ++r) {
    LinkStat ls;
    ls.id = p_.resources[r].id;
    ls.is_link = p_.resources[r].is_link;
    ls.capacity_GBps = p_.resources[r].capacity_GBps;
    ls.bytes = res_[r].bytes;
    ls.busy_us = res_[r].busy;
    ls.max_load = res_[r].max_load;
    out_.max_link_load = std::max(out_.max_link_load, ls.max_load);
    out_.links.push_back(std::move(ls));
  }
}

void Engine::schedule(int32_t t, double time) {
  TbState& s = tb_[static_cast<size_t>(t)];
  ++s.version;
  queue_.push(Event{time, t, s.version});
}

void Engine::wait_on(int32_t t, int32_t slot, int32_t value) {
  TbState& s = tb_[static_cast<size_t>(t)];
  s.wait_value = value;
  s.listed = true;
  s.next_waiter = waiters_[static_cast<size_t>(slot)];
  waiters_[static_cast<size_t>(slot)] = t;
}

void Engine::wake(int32_t slot) {
  int32_t prev = -1;
  int32_t cur = waiters_[static_cast<size_t>(slot)];
  const int32_t value = done_[static_cast<size_t>(slot)];
  while (cur >= 0) {
    TbState& w = tb_[static_cast<size_t>(cur)];
    int32_t next = w.next_waiter;
    if (value >= w.wait_value) {
      if (prev < 0) waiters_[static_cast<size_t>(slot)] = next;
      else tb_[static_cast<size_t>(prev)].next_waiter = next;
      w.next_waiter = -1;
      w.listed = false;
      ready_.push_back(cur);
    } else {
      prev = cur;
    }
    cur = next;
  }
}

void Engine::advance(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  while (true) {
    if (s.phase == Phase::Timed || s.phase == Phase::Flow || s.phase == Phase::Finished) return;
    const ProgSlot& ps = p_.slots[static_cast<size_t>(s.slot)];
    if (!s.deps_done) {
      while (s.dep_cursor < ps.dep_end) {
        int32_t d = p_.deps[s.dep_cursor];
        if (done_[static_cast<size_t>(d)] <= s.k) {
          if (!s.listed) wait_on(t, d, s.k + 1);
          s.phase = Phase::WaitDeps;
          return;
        }
        ++s.dep_cursor;
      }
      s.deps_done = true;
      s.ready = now_;
      s.phase = Phase::Ready;
    }
    const double bytes = payload(ps, s.k);
    switch (ps.prim) {
      case Primitive::Nop:
        s.busy_start = now_;
        complete(t);
        continue;
      case Primitive::Copy:
      case Primitive::Reduce:
        s.busy_start = now_;
        s.phase = Phase::Timed;
        schedule(t, now_ + cost_.alpha_us + bytes * ps.traffic / local_rate_[static_cast<size_t>(p_.tbs[static_cast<size_t>(t)].rank)]);
        return;
      case Primitive::Send:
        try_start_send(t, ps.send_conn, bytes, now_ + cost_.alpha_us, -kInf, now_);
        return;
      case Primitive::Recv:
      case Primitive::RecvReduceCopy: {
        ConnState& c = conn_[static_cast<size_t>(ps.recv_conn)];
        const int32_t m = c.consumed;
        if (c.started <= m || ring_end_[ring(ps.recv_conn, m)] == kInf) {
          c.receiver_waiting = true;
          s.phase = Phase::WaitData;
          return;
        }
        schedule_receive(t);
        return;
      }
      case Primitive::RecvCopySend:
      case Primitive::RecvReduceCopySend:
      case Primitive::RecvReduceSend: {
        ConnState& c = conn_[static_cast<size_t>(ps.recv_conn)];
        const int32_t m = c.consumed;
        if (c.started <= m) {
          c.receiver_waiting = true;
          s.phase = Phase::WaitData;
          return;
        }
        const size_t e = ring(ps.recv_conn, m);
        const double first = std::max(now_, ring_start_[e]);
        if (!try_start_send(t, ps.send_conn, bytes, first + cost_.alpha_us, ring_end_[e], first)) return;
        // The input is still arriving: ask to hear when its last byte has landed.
        if (ring_end_[e] == kInf) c.receiver_waiting = true;
        return;
      }
    }
    return;
  }
}

bool Engine::try_start_send(int32_t t, int32_t conn, double bytes, double move_from, double not_before, double busy_start) {
  TbState& s = tb_[static_cast<size_t>(t)];
  ConnState& c = conn_[static_cast<size_t>(conn)];
  const int32_t m = c.started;
  if (m >= c.consumed + par_.fifo_depth) {
    c.sender_waiting = true;
    s.phase = Phase::WaitCredit;
    return false;
  }
  const ProgConn& pc = p_.conns[static_cast<size_t>(conn)];
  ++c.started;
  const size_t e = ring(conn, m);
  ring_start_[e] = move_from + pc.latency_us;
  ring_end_[e] = kInf;
  s.phase = Phase::Flow;
  s.flow_conn = conn;
  s.flow_msg = m;
  s.busy_start = busy_start;
  start_flow(t, conn, bytes, move_from, not_before);
  // A forwarding receiver waiting for this message can start its own flow now.
  if (c.receiver_waiting) {
    const int32_t r = pc.receiver_tb;
    TbState& rs = tb_[static_cast<size_t>(r)];
    const Primitive rp = p_.slots[static_cast<size_t>(rs.slot)].prim;
    if (rs.phase == Phase::WaitData && primitive_sends(rp)) {
      c.receiver_waiting = false;
      ready_.push_back(r);
    }
  }
  return true;
}

void Engine::schedule_receive(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const ProgSlot& ps = p_.slots[static_cast<size_t>(s.slot)];
  const int32_t m = conn_[static_cast<size_t>(ps.recv_conn)].consumed;
  const size_t e = ring(ps.recv_conn, m);
  // The receiver copies (or reduces) out of staging as the data lands, at its local rate:
  // it ends when the last byte has landed or when it has caught up, whichever is later.
  const double begin = std::max(s.ready, ring_start_[e]);
  const double work = payload(ps, s.k) * ps.traffic / local_rate_[static_cast<size_t>(p_.tbs[static_cast<size_t>(t)].rank)];
  s.busy_start = begin;
  s.phase = Phase::Timed;
  schedule(t, std::max(ring_end_[e], begin + work) + cost_.alpha_us);
}

void Engine::on_event(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  if (s.phase == Phase::Timed) {
    complete(t);
    ready_.push_back(t);
    return;
  }
  WEFT_ASSERT(s.phase == Phase::Flow, "simulator: event for a thread block with nothing in flight");
  s.remaining = 0;  // the event is the flow's computed end: its data has all moved
  s.last = now_;
  if (s.not_before > now_) {
    // A forwarding flow whose input has not all arrived: it ends with its input.
    if (s.not_before < kInf) schedule(t, s.not_before);
    return;
  }
  const int32_t conn = s.flow_conn;
  const ProgConn& pc = p_.conns[static_cast<size_t>(conn)];
  end_flow(t);
  ring_end_[ring(conn, s.flow_msg)] = now_ + pc.latency_us;
  ConnState& c = conn_[static_cast<size_t>(conn)];
  if (c.receiver_waiting) {
    const int32_t r = pc.receiver_tb;
    TbState& rs = tb_[static_cast<size_t>(r)];
    c.receiver_waiting = false;
    if (rs.phase == Phase::Flow) {
      progress(rs);
      rs.not_before = now_ + pc.latency_us;
      reschedule_flow(r);
    } else {
      ready_.push_back(r);
    }
  }
  complete(t);
  ready_.push_back(t);
}

void Engine::complete(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const ProgSlot& ps = p_.slots[static_cast<size_t>(s.slot)];
  s.busy += now_ - s.busy_start;
  ++s.invocations;
  if (par_.trace) {
    if (out_.trace.size() + 2 <= par_.trace_limit) {
      if (s.busy_start > s.arrive + 1e-9) {
        out_.trace.push_back(TraceSpan{s.slot, s.k, s.arrive, s.busy_start, true});
        out_.trace_tb.push_back(t);
      }
      out_.trace.push_back(TraceSpan{s.slot, s.k, s.busy_start, now_, false});
      out_.trace_tb.push_back(t);
    } else {
      out_.trace_truncated = true;
    }
  }
  if (par_.check) {
    const size_t i = static_cast<size_t>(s.slot) * static_cast<size_t>(par_.microbatches) + static_cast<size_t>(s.k);
    ++out_.inv_count[i];
    out_.inv_ready_us[i] = s.ready;
    out_.inv_end_us[i] = now_;
  }
  done_[static_cast<size_t>(s.slot)] = s.k + 1;
  if (waiters_[static_cast<size_t>(s.slot)] >= 0) wake(s.slot);
  if (ps.recv_conn >= 0) {
    ConnState& c = conn_[static_cast<size_t>(ps.recv_conn)];
    ++c.consumed;
    if (c.sender_waiting) {
      c.sender_waiting = false;
      ready_.push_back(p_.conns[static_cast<size_t>(ps.recv_conn)].sender_tb);
    }
  }
  // Next invocation, in the plan's execution order.
  const ProgTb& pt = p_.tbs[static_cast<size_t>(t)];
  if (p_.execution == ExecutionModel::Task) {
    if (++s.k == par_.microbatches) {
      s.k = 0;
      ++s.slot;
    }
    if (s.slot == pt.slot_end) s.phase = Phase::Finished;
  } else {
    if (++s.slot == pt.slot_end) {
      s.slot = pt.slot_begin;
      if (++s.k == par_.microbatches) s.phase = Phase::Finished;
    }
  }
  s.arrive = now_;
  if (s.phase == Phase::Finished) {
    s.finish = now_;
    return;
  }
  s.phase = Phase::Ready;
  s.deps_done = false;
  s.dep_cursor = p_.slots[static_cast<size_t>(s.slot)].dep_begin;
}

// ---- flows ----------------------------------------------------------------------------

void Engine::start_flow(int32_t t, int32_t conn, double bytes, double move_from, double not_before) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const ProgConn& pc = p_.conns[static_cast<size_t>(conn)];
  s.nres = static_cast<int32_t>(pc.res_end - pc.res_begin);
  s.cap = pc.cap_GBps * 1e3;
  s.rate = -1;
  s.remaining = bytes;
  s.last = now_;
  s.move_from = move_from;
  s.not_before = not_before;
  for (int32_t i = 0; i < s.nres; ++i) {
    const int32_t r = p_.conn_res[pc.res_begin + static_cast<uint32_t>(i)];
    ResState& rs = res_[static_cast<size_t>(r)];
    s.res[i] = r;
    s.pos[i] = static_cast<int32_t>(rs.flows.size());
    rs.flows.push_back(t);
    rs.demand += s.cap;
    if (rs.active++ == 0) rs.since = now_;
    rs.bytes += bytes;
  }
  for (int32_t i = 0; i < s.nres; ++i) refactor(s.res[i], t);
  double f = 1.0;
  for (int32_t i = 0; i < s.nres; ++i) f = std::min(f, res_[static_cast<size_t>(s.res[i])].factor);
  s.rate = s.cap * f;
  reschedule_flow(t);
  if (par_.check)
    for (int32_t i = 0; i < s.nres; ++i) check_load(s.res[i]);
}

void Engine::end_flow(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  for (int32_t i = 0; i < s.nres; ++i) {
    const int32_t r = s.res[i];
    ResState& rs = res_[static_cast<size_t>(r)];
    const int32_t at = s.pos[i];
    const int32_t moved = rs.flows.back();
    rs.flows[static_cast<size_t>(at)] = moved;
    rs.flows.pop_back();
    if (moved != t) {
      TbState& m = tb_[static_cast<size_t>(moved)];
      for (int32_t j = 0; j < m.nres; ++j)
        if (m.res[j] == r) m.pos[j] = at;
    }
    rs.demand = rs.flows.empty() ? 0.0 : rs.demand - s.cap;
    if (--rs.active == 0) rs.busy += now_ - rs.since;
  }
  const int32_t n = s.nres;
  s.nres = 0;
  for (int32_t i = 0; i < n; ++i) {
    refactor(s.res[i], -1);
    if (par_.check) check_load(s.res[i]);
  }
}

void Engine::refactor(int32_t r, int32_t skip) {
  ResState& rs = res_[static_cast<size_t>(r)];
  const double f = cost_.share_factor(rs.cap, rs.demand);
  if (f == rs.factor) return;
  rs.factor = f;
  for (int32_t other : rs.flows)
    if (other != skip) update_rate(other);
}

void Engine::progress(TbState& s) {
  const double from = std::max(s.last, s.move_from);
  if (now_ > from && s.rate > 0) s.remaining = std::max(0.0, s.remaining - s.rate * (now_ - from));
  s.last = now_;
}

void Engine::update_rate(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  double f = 1.0;
  for (int32_t i = 0; i < s.nres; ++i) f = std::min(f, res_[static_cast<size_t>(s.res[i])].factor);
  const double rate = s.cap * f;
  if (rate == s.rate) return;
  progress(s);
  s.rate = rate;
  reschedule_flow(t);
}

void Engine::reschedule_flow(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const double data_end = std::max(now_, s.move_from) + (s.remaining > 0 ? s.remaining / s.rate : 0.0);
  const double at = std::max(data_end, s.not_before);
  if (at < kInf) schedule(t, at);
  else ++s.version;  // stalled until its input's end is known; drop any pending entry
}

void Engine::check_load(int32_t r) {
  ResState& rs = res_[static_cast<size_t>(r)];
  double sum = 0;
  for (int32_t f : rs.flows) sum += tb_[static_cast<size_t>(f)].rate;
  rs.max_load = std::max(rs.max_load, sum / rs.cap);
}

void Engine::deadlock() {
  std::string what;
  int stuck = 0;
  for (size_t t = 0; t < tb_.size(); ++t) {
    const TbState& s = tb_[t];
    if (s.phase == Phase::Finished) continue;
    if (++stuck > 3) continue;
    const ProgSlot& ps = p_.slots[static_cast<size_t>(s.slot)];
    std::string why;
    switch (s.phase) {
      case Phase::WaitDeps: {
        const int32_t d = p_.deps[s.dep_cursor];
        why = "its dependency " + p_.describe_slot(d);
        break;
      }
      case Phase::WaitData: {
        const ProgConn& c = p_.conns[static_cast<size_t>(ps.recv_conn)];
        why = text::format("data from rank %d (channel %d)", c.src, c.channel);
        break;
      }
      case Phase::WaitCredit: {
        const ProgConn& c = p_.conns[static_cast<size_t>(ps.send_conn)];
        why = text::format("a free staging slot on rank %d (channel %d)", c.dst, c.channel);
        break;
      }
      default: why = "the end of its input"; break;
    }
    what += (what.empty() ? "" : "; ") + p_.describe_slot(s.slot) + text::format(" waits at micro-batch %d for ", s.k) + why;
  }
  fail(ErrorCode::Verify, text::format("simulation: the plan deadlocks at %.3f us with %d thread blocks stuck: ", now_, stuck) + what +
                              (stuck > 3 ? "; ..." : ""));
}

}  // namespace

void run_engine(const Program& prog, const CostModel& cost, const EngineParams& params, SimReport& out) {
  Engine(prog, cost, params, out).run();
}

}  // namespace weft::sim
