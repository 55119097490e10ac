// The discrete-event engine.
//
// State lives in flat arrays indexed by global thread block, slot, connection and resource
// ids (Program numbering). Each thread block has at most one activity in flight (a flow it
// drives, or a timed local step), hence at most one live entry in the event queue; an
// activity moved earlier (its flow's rate rose) bumps the block's version and the old entry
// is dropped when popped; one moved later keeps its entry, which is pushed again at the new
// time when it pops (Engine::schedule). Thread blocks that become able to proceed at the
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

#include "ir/plan_core.hpp"
#include "sim/event_queue.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxPath = 4;  // NIC tx, rack uplink, rack downlink, NIC rx

// Barrier: done with this call, its rank's other blocks are not (EngineParams::calls);
// Launch: the last of them, its event starting the rank's next call.
enum class Phase : uint8_t { Ready, WaitDeps, WaitData, WaitCredit, Timed, Flow, Barrier, Launch, Finished };

// A thread block's state: what one event touches, packed in two cache lines. The current
// slot's fields are copied in when the block moves to it (once per slot under task-level
// execution), so that most events never read the (large) slot array.
struct alignas(64) TbState {
  int32_t slot = 0;           // current global slot
  int32_t k = 0;              // current micro-batch
  uint32_t dep_cursor = 0;    // next dependency to check
  uint32_t dep_begin = 0;     // the current slot's dependencies
  uint32_t dep_end = 0;
  uint32_t version = 0;       // of its live event-queue entry
  int32_t waiters = -1;       // head of the list of blocks waiting on one of this block's slots
  int32_t next_waiter = -1;   // next in the list this block is on
  int32_t wait_slot = -1;     // the slot it waits on (for invocation k)
  int32_t send_conn = -1;
  int32_t recv_conn = -1;
  Phase phase = Phase::Ready;
  Primitive prim = Primitive::Nop;
  bool deps_done = false;
  bool listed = false;        // on another block's waiting list
  uint8_t nres = 0;
  double scale = 1;           // payload bytes per micro-batch byte
  double local_us = 0;        // us of local work (receive side, copy, reduce) per micro-batch byte
  int32_t res[kMaxPath] = {0, 0, 0, 0};
  // The flow it drives (phase Flow).
  double rate = 0;            // bytes/us; < 0 while being registered
  double remaining = 0;       // bytes still to move after `from`
  double from = 0;            // progress is counted from here (start + alpha, then each update)
  double not_before = 0;      // forwarding: cannot end before its input's last byte arrived
  double ready = 0;           // when the current invocation's dependencies were met
};
static_assert(sizeof(TbState) <= 128, "keep a thread block's state in two cache lines");

// Busy-time accounting, apart from the hot state (small: stays in cache).
struct TbBusy {
  double start = 0;           // the current invocation's busy period began here
  double total = 0;
  double in_primitive = 0;    // from each invocation's dependencies met to its end
  double first = -1;          // when its first busy period began
};

struct ConnState {
  int32_t started = 0;        // messages whose flow has started
  int32_t consumed = 0;       // messages whose receiving invocation has ended
  int32_t ended = 0;          // messages whose flow has ended (they end in order)
  int32_t sender_tb = -1;
  int32_t receiver_tb = -1;
  bool sender_waiting = false;
  bool receiver_waiting = false;
  double latency = 0;         // us
  double cap = 0;             // bytes/us of the sending block
};

struct Message {
  double start;               // first byte lands at the receiver
  double end;                 // last byte lands (kInf until known)
};

struct ResState {
  // What every flow start and end touches.
  int32_t active = 0;
  bool saturable = true;      // tracks its flows (see ProgResource::saturable)
  double since = 0;
  double busy = 0;
  double bytes = 0;
  // Saturable resources only.
  double cap = 0;             // bytes/us
  double demand = 0;          // bytes/us: sum of the per-TB rates of the flows on it
  double factor = 1;
  double gamma = 0;           // contention penalty (CostModel::gamma, or EngineParams::nvlink_gamma)
  std::vector<int32_t> flows; // thread blocks whose flow uses it
  double max_load = 0;
};

class Engine {
 public:
  Engine(const Program& prog, const CostModel& cost, const EngineParams& params, SimReport& out)
      : p_(prog), cost_(cost), par_(params), out_(out) {}

  void run();

 private:
  // Thread-block stepping.
  void enter_slot(int32_t t, int32_t slot);
  void advance(int32_t t);
  void complete(int32_t t);
  void on_event(int32_t t);
  bool try_start_send(int32_t t, double payload, double move_from, double not_before, double busy_start);
  void schedule_receive(int32_t t);
  void wait_on(int32_t t, int32_t owner, int32_t slot);
  void wake(int32_t owner);
  int32_t done_of(int32_t owner, int32_t slot) const;
  void schedule(int32_t t, double time);
  void end_call(int32_t t);
  void collect_results();
  void relaunch(int32_t rank);
  double mb_bytes(const TbState& s) const {
    return static_cast<double>(s.k + 1 < par_.microbatches ? par_.microbatch_bytes : last_mb_);
  }
  double payload(const TbState& s) const { return s.scale * mb_bytes(s); }
  Message& msg(int32_t conn, int32_t m) {
    return ring_[static_cast<size_t>(conn) * static_cast<size_t>(par_.fifo_depth) + static_cast<size_t>(m % par_.fifo_depth)];
  }

  // Flows.
  void start_flow(int32_t t, double payload, double move_from, double not_before);
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
  std::vector<TbBusy> busy_;
  std::vector<double> finish_;       // per block: end of its last invocation
  std::vector<int64_t> invocations_; // per block
  std::vector<double> arrive_;       // per block, tracing only: when it reached the invocation
  std::vector<double> due_;          // per block: when its activity in flight ends
  std::vector<double> queued_;       // per block: time of its live queue entry (kInf: none)
  std::vector<ConnState> conn_;
  std::vector<Message> ring_;        // per connection x depth
  std::vector<ResState> res_;
  std::vector<double> local_rate_;   // per rank: bytes/us of one block's local work
  std::vector<int32_t> ready_;
  // Per rank (EngineParams::calls): its blocks with slots, how many have not ended the
  // current call, and which call that is.
  std::vector<std::vector<int32_t>> rank_blocks_;
  std::vector<int32_t> rank_left_, rank_call_;
  EventQueue queue_;
  int64_t events_ = 0;
};

void Engine::run() {
  const size_t n_mb = static_cast<size_t>(par_.microbatches);
  last_mb_ = par_.chunk_bytes - (n_mb - 1) * par_.microbatch_bytes;
  tb_.assign(p_.tbs.size(), TbState{});
  busy_.assign(p_.tbs.size(), TbBusy{});
  finish_.assign(p_.tbs.size(), 0.0);
  due_.assign(p_.tbs.size(), kInf);
  queued_.assign(p_.tbs.size(), kInf);
  invocations_.assign(p_.tbs.size(), 0);
  if (par_.trace) arrive_.assign(p_.tbs.size(), 0.0);
  if (par_.slot_times) {
    out_.slot_first_us.assign(p_.slots.size(), -1.0);
    out_.slot_last_us.assign(p_.slots.size(), 0.0);
    out_.slot_busy_us.assign(p_.slots.size(), 0.0);
  }
  conn_.assign(p_.conns.size(), ConnState{});
  for (size_t c = 0; c < p_.conns.size(); ++c) {
    const ProgConn& pc = p_.conns[c];
    conn_[c].sender_tb = pc.sender_tb;
    conn_[c].receiver_tb = pc.receiver_tb;
    conn_[c].latency = pc.latency_us * par_.latency_scale;
    conn_[c].cap = pc.cap_GBps * 1e3 * par_.rate_scale;
  }
  ring_.assign(p_.conns.size() * static_cast<size_t>(par_.fifo_depth), Message{0.0, kInf});
  res_.resize(p_.resources.size());
  for (size_t r = 0; r < res_.size(); ++r) {
    const ResourceKind kind = p_.resources[r].id.kind;
    const bool nvlink = kind == ResourceKind::NvlinkPair || kind == ResourceKind::NvlinkEgress || kind == ResourceKind::NvlinkIngress;
    res_[r].cap = p_.resources[r].capacity_GBps * 1e3;
    // Check mode tracks every resource, so that the load check sees every flow. Rates scaled
    // up can oversubscribe a resource the plan's figures do not.
    res_[r].saturable = par_.check || p_.resources[r].demand_GBps * 1e3 * par_.rate_scale > res_[r].cap * (1.0 + 1e-12);
    res_[r].gamma = nvlink && par_.nvlink_gamma >= 0 ? par_.nvlink_gamma : cost_.gamma;
  }
  // A block's local work runs at its own rate, or at its share of the GPU's HBM if all the
  // rank's blocks worked at once (a static bound: HBM is rarely the limit).
  local_rate_.resize(static_cast<size_t>(p_.num_ranks));
  for (int32_t r = 0; r < p_.num_ranks; ++r) {
    int32_t n = std::max(1, p_.rank_tbs[static_cast<size_t>(r)]);
    local_rate_[static_cast<size_t>(r)] = std::min(cost_.tb_local_GBps * par_.local_rate_scale, cost_.hbm_GBps / n) * 1e3;
  }
  if (par_.check) {
    out_.inv_count.assign(p_.slots.size() * n_mb, 0);
    out_.inv_ready_us.assign(p_.slots.size() * n_mb, -1.0);
    out_.inv_start_us.assign(p_.slots.size() * n_mb, -1.0);
    out_.inv_end_us.assign(p_.slots.size() * n_mb, -1.0);
  }
  ready_.reserve(p_.tbs.size());

  rank_blocks_.assign(static_cast<size_t>(p_.num_ranks), {});
  rank_call_.assign(static_cast<size_t>(p_.num_ranks), 0);
  for (size_t t = 0; t < p_.tbs.size(); ++t) {
    TbState& s = tb_[t];
    if (p_.tbs[t].slot_begin == p_.tbs[t].slot_end) {
      s.phase = Phase::Finished;
      continue;
    }
    rank_blocks_[static_cast<size_t>(p_.tbs[t].rank)].push_back(static_cast<int32_t>(t));
    enter_slot(static_cast<int32_t>(t), p_.tbs[t].slot_begin);
    ready_.push_back(static_cast<int32_t>(t));
  }
  rank_left_.resize(rank_blocks_.size());
  for (size_t r = 0; r < rank_blocks_.size(); ++r) rank_left_[r] = static_cast<int32_t>(rank_blocks_[r].size());
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
    const size_t t = static_cast<size_t>(e.tb);
    if (e.version != tb_[t].version) continue;
    if (due_[t] > e.time) {
      // The activity was put off while this entry waited: move the entry (see schedule).
      queued_[t] = due_[t];
      queue_.push(Event{due_[t], e.tb, e.version});
      continue;
    }
    queued_[t] = kInf;
    ++events_;
    now_ = e.time;
    on_event(e.tb);
  }

  for (const TbState& s : tb_)
    if (s.phase != Phase::Finished) deadlock();
  collect_results();
}

void Engine::collect_results() {
  double end = 0;
  for (double f : finish_) end = std::max(end, f);
  out_.time_us = end;
  out_.rank_end_us.assign(static_cast<size_t>(p_.num_ranks), 0.0);
  for (size_t t = 0; t < p_.tbs.size(); ++t) {
    double& e = out_.rank_end_us[static_cast<size_t>(p_.tbs[t].rank)];
    e = std::max(e, finish_[t]);
  }
  out_.events = events_;
  out_.tbs.clear();
  for (size_t t = 0; t < p_.tbs.size(); ++t) {
    if (p_.tbs[t].slot_begin == p_.tbs[t].slot_end) continue;
    TbStat st;
    st.rank = p_.tbs[t].rank;
    st.tb = p_.tbs[t].local;
    st.weight = p_.tbs[t].weight;
    st.busy_us = busy_[t].total;
    st.in_primitive_us = busy_[t].in_primitive;
    st.lifetime_us = finish_[t];
    st.first_busy_us = std::max(0.0, busy_[t].first);
    st.invocations = invocations_[t];
    out_.invocations += st.invocations * st.weight;
    out_.simulated_invocations += st.invocations;
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

void Engine::enter_slot(int32_t t, int32_t slot) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const ProgSlot& ps = p_.slots[static_cast<size_t>(slot)];
  s.slot = slot;
  s.dep_end = ps.dep_end;
  s.send_conn = ps.send_conn;
  s.recv_conn = ps.recv_conn;
  s.prim = ps.prim;
  s.scale = ps.scale;
  // A merged block (weight k) does k blocks' local work at k times one block's rate.
  const ProgTb& pt = p_.tbs[static_cast<size_t>(t)];
  s.local_us = ps.scale / pt.weight * CostModel::local_traffic_factor(ps.prim) / local_rate_[static_cast<size_t>(pt.rank)];
  // A polled receive (LL, LL128) takes its bytes no faster than the block polls them.
  if (par_.polled_receive_GBps > 0 && (ps.prim == Primitive::Recv || ps.prim == Primitive::RecvReduceCopy))
    s.local_us = std::max(s.local_us, ps.scale / pt.weight / (par_.polled_receive_GBps * 1e3));
  s.dep_begin = ps.dep_begin;
  s.dep_cursor = ps.dep_begin;
  s.deps_done = false;
}

// A block's activity moves when its flow's rate changes. Moving it later keeps the entry
// already queued (it is moved when it pops, by then usually for good); only moving it
// earlier needs a new entry, the old one becoming stale. Under contention every flow start
// on a NIC slows the others, so this halves the queue's traffic.
void Engine::schedule(int32_t t, double time) {
  const size_t i = static_cast<size_t>(t);
  due_[i] = time;
  if (time >= queued_[i]) return;
  TbState& s = tb_[i];
  ++s.version;
  queued_[i] = time;
  queue_.push(Event{time, t, s.version});
}

// Invocations of `slot` finished, read off its thread block's position: a block runs its
// slots in a fixed order, so its current slot and micro-batch say how far each of its slots
// has come. This keeps no per-slot counter (a large, cold array at scale).
int32_t Engine::done_of(int32_t owner, int32_t slot) const {
  const TbState& o = tb_[static_cast<size_t>(owner)];
  if (o.phase == Phase::Finished || o.phase == Phase::Barrier || o.phase == Phase::Launch) return par_.microbatches;
  if (p_.execution == ExecutionModel::Task) return slot < o.slot ? par_.microbatches : (slot == o.slot ? o.k : 0);
  return slot < o.slot ? o.k + 1 : o.k;
}

void Engine::wait_on(int32_t t, int32_t owner, int32_t slot) {
  TbState& s = tb_[static_cast<size_t>(t)];
  TbState& o = tb_[static_cast<size_t>(owner)];
  s.listed = true;
  s.wait_slot = slot;
  s.next_waiter = o.waiters;
  o.waiters = t;
}

void Engine::wake(int32_t owner) {
  int32_t prev = -1;
  int32_t cur = tb_[static_cast<size_t>(owner)].waiters;
  while (cur >= 0) {
    TbState& w = tb_[static_cast<size_t>(cur)];
    int32_t next = w.next_waiter;
    // A waiter at micro-batch k needs invocation k done: done >= k + 1.
    if (done_of(owner, w.wait_slot) > w.k) {
      if (prev < 0) tb_[static_cast<size_t>(owner)].waiters = next;
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
    if (s.phase == Phase::Timed || s.phase == Phase::Flow || s.phase >= Phase::Barrier) return;
    if (!s.deps_done) {
      while (s.dep_cursor < s.dep_end) {
        const int32_t d = p_.deps[s.dep_cursor], owner = p_.dep_tbs[s.dep_cursor];
        if (done_of(owner, d) <= s.k) {
          if (!s.listed) wait_on(t, owner, d);
          s.phase = Phase::WaitDeps;
          return;
        }
        ++s.dep_cursor;
      }
      s.deps_done = true;
      s.ready = now_;
      s.phase = Phase::Ready;
    }
    const double bytes = payload(s);
    switch (s.prim) {
      case Primitive::Nop:
        busy_[static_cast<size_t>(t)].start = now_;
        complete(t);
        continue;
      case Primitive::Copy:
      case Primitive::Reduce:
        busy_[static_cast<size_t>(t)].start = now_;
        s.phase = Phase::Timed;
        schedule(t, now_ + cost_.alpha_us + mb_bytes(s) * s.local_us);
        return;
      case Primitive::Send:
        try_start_send(t, bytes, now_ + cost_.alpha_us, -kInf, now_);
        return;
      case Primitive::Recv:
      case Primitive::RecvReduceCopy: {
        ConnState& c = conn_[static_cast<size_t>(s.recv_conn)];
        const int32_t m = c.consumed;
        if (c.started <= m || msg(s.recv_conn, m).end == kInf) {
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
        ConnState& c = conn_[static_cast<size_t>(s.recv_conn)];
        const int32_t m = c.consumed;
        if (c.started <= m) {
          c.receiver_waiting = true;
          s.phase = Phase::WaitData;
          return;
        }
        const Message in = msg(s.recv_conn, m);
        if (par_.whole_messages && in.end == kInf) {
          c.receiver_waiting = true;
          s.phase = Phase::WaitData;
          return;
        }
        const double first = std::max(now_, par_.whole_messages ? in.end : in.start);
        if (!try_start_send(t, bytes, first + cost_.alpha_us, in.end, first)) return;
        // The input is still arriving: ask to hear when its last byte has landed.
        if (in.end == kInf) c.receiver_waiting = true;
        return;
      }
    }
    return;
  }
}

bool Engine::try_start_send(int32_t t, double bytes, double move_from, double not_before, double busy_start) {
  TbState& s = tb_[static_cast<size_t>(t)];
  ConnState& c = conn_[static_cast<size_t>(s.send_conn)];
  const int32_t m = c.started;
  if (m >= c.consumed + par_.fifo_depth) {
    c.sender_waiting = true;
    s.phase = Phase::WaitCredit;
    return false;
  }
  ++c.started;
  msg(s.send_conn, m) = Message{move_from + c.latency, kInf};
  s.phase = Phase::Flow;
  busy_[static_cast<size_t>(t)].start = busy_start;
  start_flow(t, bytes, move_from, not_before);
  // A forwarding receiver waiting for this message can start its own flow now.
  if (c.receiver_waiting) {
    const int32_t r = c.receiver_tb;
    const TbState& rs = tb_[static_cast<size_t>(r)];
    if (rs.phase == Phase::WaitData && primitive_sends(rs.prim)) {
      c.receiver_waiting = false;
      ready_.push_back(r);
    }
  }
  return true;
}

void Engine::schedule_receive(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const Message in = msg(s.recv_conn, conn_[static_cast<size_t>(s.recv_conn)].consumed);
  // The receiver copies (or reduces) out of staging as the data lands, at its local rate:
  // it ends when the last byte has landed or when it has caught up, whichever is later.
  const double begin = std::max(s.ready, par_.whole_messages ? in.end : in.start);
  const double work = mb_bytes(s) * s.local_us;
  busy_[static_cast<size_t>(t)].start = begin;
  s.phase = Phase::Timed;
  schedule(t, std::max(in.end, begin + work) + cost_.alpha_us);
}

void Engine::on_event(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  if (s.phase == Phase::Launch) {
    relaunch(p_.tbs[static_cast<size_t>(t)].rank);
    return;
  }
  if (s.phase == Phase::Timed) {
    complete(t);
    ready_.push_back(t);
    return;
  }
  WEFT_ASSERT(s.phase == Phase::Flow, "simulator: event for a thread block with nothing in flight");
  s.remaining = 0;  // the event is the flow's computed end: its data has all moved
  s.from = now_;
  if (s.not_before > now_) {
    // A forwarding flow whose input has not all arrived: it ends with its input.
    if (s.not_before < kInf) schedule(t, s.not_before);
    return;
  }
  const int32_t conn = s.send_conn;
  end_flow(t);
  ConnState& c = conn_[static_cast<size_t>(conn)];
  msg(conn, c.ended++).end = now_ + c.latency;
  if (c.receiver_waiting) {
    const int32_t r = c.receiver_tb;
    TbState& rs = tb_[static_cast<size_t>(r)];
    c.receiver_waiting = false;
    if (rs.phase == Phase::Flow) {
      progress(rs);
      rs.not_before = now_ + c.latency;
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
  TbBusy& b = busy_[static_cast<size_t>(t)];
  b.total += now_ - b.start;
  b.in_primitive += now_ - s.ready;
  if (b.first < 0) b.first = b.start;
  ++invocations_[static_cast<size_t>(t)];
  if (par_.trace) {
    double& arrive = arrive_[static_cast<size_t>(t)];
    if (out_.trace.size() + 2 <= par_.trace_limit) {
      if (b.start > arrive + 1e-9) {
        out_.trace.push_back(TraceSpan{s.slot, s.k, arrive, b.start, true});
        out_.trace_tb.push_back(t);
      }
      out_.trace.push_back(TraceSpan{s.slot, s.k, b.start, now_, false});
      out_.trace_tb.push_back(t);
    } else {
      out_.trace_truncated = true;
    }
    arrive = now_;
  }
  if (par_.slot_times) {
    double& first = out_.slot_first_us[static_cast<size_t>(s.slot)];
    if (first < 0) first = b.start;
    out_.slot_last_us[static_cast<size_t>(s.slot)] = now_;
    out_.slot_busy_us[static_cast<size_t>(s.slot)] += now_ - b.start;
  }
  if (par_.check) {
    const size_t i = static_cast<size_t>(s.slot) * static_cast<size_t>(par_.microbatches) + static_cast<size_t>(s.k);
    ++out_.inv_count[i];
    out_.inv_ready_us[i] = s.ready;
    out_.inv_start_us[i] = b.start;
    out_.inv_end_us[i] = now_;
  }
  if (s.recv_conn >= 0) {
    ConnState& c = conn_[static_cast<size_t>(s.recv_conn)];
    ++c.consumed;
    if (c.sender_waiting) {
      c.sender_waiting = false;
      ready_.push_back(c.sender_tb);
    }
  }
  // Next invocation, in the plan's execution order.
  const ProgTb& pt = p_.tbs[static_cast<size_t>(t)];
  int32_t next = s.slot;
  bool finished = false;
  if (p_.execution == ExecutionModel::Task) {
    if (++s.k == par_.microbatches) {
      s.k = 0;
      ++next;
    }
    finished = next == pt.slot_end;
  } else {
    if (++next == pt.slot_end) {
      next = pt.slot_begin;
      finished = ++s.k == par_.microbatches;
    }
  }
  if (finished) {
    end_call(t);
  } else {
    s.phase = Phase::Ready;
    if (next != s.slot) {
      enter_slot(t, next);
    } else {
      s.deps_done = false;
      s.dep_cursor = s.dep_begin;
    }
  }
  // Its new position is the counter the waiters read.
  if (s.waiters >= 0) wake(t);
}

// The block ended the call: it waits for its rank's other blocks, and the last of them
// starts the rank's next call call_gap_us later (its stream's next kernel), if any.
void Engine::end_call(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  finish_[static_cast<size_t>(t)] = now_;
  const size_t r = static_cast<size_t>(p_.tbs[static_cast<size_t>(t)].rank);
  const bool last = --rank_left_[r] == 0;
  if (rank_call_[r] + 1 >= par_.calls) {
    s.phase = Phase::Finished;
    return;
  }
  s.phase = last ? Phase::Launch : Phase::Barrier;
  if (last) schedule(t, now_ + par_.call_gap_us);
}

// The rank's next call: every block from its first slot, all at once (a block's done_of
// reads the others' positions, which must all belong to the same call).
void Engine::relaunch(int32_t rank) {
  const size_t r = static_cast<size_t>(rank);
  ++rank_call_[r];
  rank_left_[r] = static_cast<int32_t>(rank_blocks_[r].size());
  for (int32_t t : rank_blocks_[r]) {
    TbState& b = tb_[static_cast<size_t>(t)];
    b.k = 0;
    b.phase = Phase::Ready;
    enter_slot(t, p_.tbs[static_cast<size_t>(t)].slot_begin);
    ready_.push_back(t);
  }
}

// ---- flows ----------------------------------------------------------------------------

void Engine::start_flow(int32_t t, double bytes, double move_from, double not_before) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const ProgConn& pc = p_.conns[static_cast<size_t>(s.send_conn)];
  s.nres = static_cast<uint8_t>(pc.res_end - pc.res_begin);
  const double cap = conn_[static_cast<size_t>(s.send_conn)].cap;
  s.rate = -1;
  s.remaining = bytes;
  s.from = move_from;
  s.not_before = not_before;
  double f = 1.0;
  for (int32_t i = 0; i < s.nres; ++i) {
    const int32_t r = p_.conn_res[pc.res_begin + static_cast<uint32_t>(i)];
    ResState& rs = res_[static_cast<size_t>(r)];
    s.res[i] = r;
    if (rs.active++ == 0) rs.since = now_;
    rs.bytes += bytes;
    if (!rs.saturable) continue;
    rs.flows.push_back(t);
    rs.demand += cap;
    refactor(r, t);
    f = std::min(f, rs.factor);
  }
  s.rate = cap * f;
  reschedule_flow(t);
  if (par_.check)
    for (int32_t i = 0; i < s.nres; ++i) check_load(s.res[i]);
}

void Engine::end_flow(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const double cap = conn_[static_cast<size_t>(s.send_conn)].cap;
  const int32_t n = s.nres;
  s.nres = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t r = s.res[i];
    ResState& rs = res_[static_cast<size_t>(r)];
    if (--rs.active == 0) rs.busy += now_ - rs.since;
    if (!rs.saturable) continue;
    // A saturable resource carries a few flows: find this one and swap it out.
    auto it = std::find(rs.flows.begin(), rs.flows.end(), t);
    *it = rs.flows.back();
    rs.flows.pop_back();
    rs.demand = rs.flows.empty() ? 0.0 : rs.demand - cap;
    refactor(r, -1);
    if (par_.check) check_load(r);
  }
}

void Engine::refactor(int32_t r, int32_t skip) {
  ResState& rs = res_[static_cast<size_t>(r)];
  const double f = CostModel::share_factor(rs.cap, rs.demand, rs.gamma);
  if (f == rs.factor) return;
  rs.factor = f;
  for (int32_t other : rs.flows)
    if (other != skip) update_rate(other);
}

void Engine::progress(TbState& s) {
  if (now_ > s.from) {
    if (s.rate > 0) s.remaining = std::max(0.0, s.remaining - s.rate * (now_ - s.from));
    s.from = now_;
  }
}

void Engine::update_rate(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  double f = 1.0;
  for (int32_t i = 0; i < s.nres; ++i) f = std::min(f, res_[static_cast<size_t>(s.res[i])].factor);
  const double rate = conn_[static_cast<size_t>(s.send_conn)].cap * f;
  if (rate == s.rate) return;
  progress(s);
  s.rate = rate;
  reschedule_flow(t);
}

void Engine::reschedule_flow(int32_t t) {
  TbState& s = tb_[static_cast<size_t>(t)];
  const double data_end = std::max(now_, s.from) + (s.remaining > 0 ? s.remaining / s.rate : 0.0);
  const double at = std::max(data_end, s.not_before);
  if (at < kInf) {
    schedule(t, at);
  } else {
    // Stalled until its input's end is known: drop any pending entry.
    ++s.version;
    queued_[static_cast<size_t>(t)] = kInf;
    due_[static_cast<size_t>(t)] = kInf;
  }
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
    std::string why;
    switch (s.phase) {
      case Phase::WaitDeps: why = "its dependency " + p_.describe_slot(p_.deps[s.dep_cursor]); break;
      case Phase::WaitData: {
        const ProgConn& c = p_.conns[static_cast<size_t>(s.recv_conn)];
        why = text::format("data from rank %d (channel %d)", c.src, c.channel);
        break;
      }
      case Phase::WaitCredit: {
        const ProgConn& c = p_.conns[static_cast<size_t>(s.send_conn)];
        why = text::format("a free staging slot on rank %d (channel %d)", c.dst, c.channel);
        break;
      }
      default: why = "the end of its input"; break;
    }
    what += (what.empty() ? "" : "; ") + p_.describe_slot(s.slot) + text::format(" waits at micro-batch %d for ", s.k) + why;
  }
  DeadlockVerdict v;
  v.ok = false;
  v.message = text::format("simulation: the plan deadlocks at %.3f us with %d thread blocks stuck: ", now_, stuck) + what +
              (stuck > 3 ? "; ..." : "");
  for (const TbState& s : tb_)
    if (s.phase != Phase::Finished) {
      const ProgSlot& ps = p_.slots[static_cast<size_t>(s.slot)];
      const ProgTb& t = p_.tbs[static_cast<size_t>(ps.tb)];
      const int32_t conn = ps.send_conn >= 0 ? ps.send_conn : ps.recv_conn;
      const ProgConn* c = conn >= 0 ? &p_.conns[static_cast<size_t>(conn)] : nullptr;
      v.cycle.push_back({t.rank, t.local, ps.local, ps.prim, c ? (ps.send_conn >= 0 ? c->dst : c->src) : -1});
    }
  throw DeadlockError(std::move(v));
}

}  // namespace

void run_engine(const Program& prog, const CostModel& cost, const EngineParams& params, SimReport& out) {
  Engine(prog, cost, params, out).run();
}

}  // namespace weft::sim
