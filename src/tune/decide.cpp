#include "tune/decide.hpp"

#include <algorithm>

#include "plan/builder.hpp"
#include "plan/plan_source.hpp"
#include "tune/cta_policy.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#include "weft/device/packet.hpp"

namespace weft {

namespace {

size_t index_of(Collective c) { return static_cast<size_t>(c); }

constexpr Collective kStandard[] = {Collective::AllGather, Collective::ReduceScatter, Collective::AllReduce,
                                    Collective::AllToAll,  Collective::Broadcast,     Collective::Reduce};

}  // namespace

DecideEnv DecideEnv::from_environment() {
  DecideEnv e;
  e.algo = config::get_string("WEFT_ALGO");
  e.scheduler = config::get_string("WEFT_SCHEDULER");
  e.proto = config::get_string("WEFT_PROTO");
  e.instances = config::get_int("WEFT_INSTANCES");
  e.microbatch = config::get_int("WEFT_MICROBATCH_BYTES");
  e.generated = config::get_string("WEFT_EXECUTOR") == "gen";
  return e;
}

CommShape CommShape::from_environment(int nranks) {
  CommShape s;
  s.nranks = nranks;
  s.cta_policy = std::max(0, parse_cta_policy(config::get_string("WEFT_CTA_POLICY"), "WEFT_CTA_POLICY"));
  s.connections = static_cast<int>(config::get_int("WEFT_CONNECTIONS"));
  s.slot_bytes = static_cast<uint64_t>(config::get_int("WEFT_SLOT_BYTES"));
  s.ll_slot_bytes = static_cast<uint64_t>(config::get_int("WEFT_LL_SLOT_BYTES"));
  return s;
}

Decider::Decider(std::shared_ptr<const SelectionTable> table, const CommShape& shape, DecideEnv env)
    : table_(std::move(table)), shape_(shape), env_(std::move(env)) {
  proto_ = algo::protocol_from_string(env_.proto);
  resolve_algo_env();
}

void Decider::resolve_algo_env() {
  // WEFT_ALGO: comma-separated entries, each "name" or "Collective:name". A name is a
  // hand-built plan ("ring", "allpairs", "chain"), "oneshot", "ce", an algorithm of
  // algorithms/ or a file; a bare name applies to the collectives it implements (a source is
  // loaded to learn which). The last match wins.
  const algo::Registry& reg = algo::registry();
  for (Collective c : kStandard) {
    std::string named;
    try {
      if (!env_.scheduler.empty() && env_.scheduler != "auto") {
        BuildOptions bo;
        bo.compile.scheduler = env_.scheduler;
        try {
          check_build_options(bo);
        } catch (const Error& e) {
          fail(e.code(), std::string("WEFT_SCHEDULER: ") + e.what());
        }
      }
      for (const std::string& raw : text::split(env_.algo, ',')) {
        std::string entry(text::trim(raw));
        if (entry.empty()) continue;
        auto colon = entry.find(':');
        if (colon != std::string::npos) {
          auto coll = collective_from_string(entry.substr(0, colon));
          if (!coll) fail(ErrorCode::InvalidArgument, "WEFT_ALGO entry '" + entry + "' names no collective");
          if (*coll == c) named = entry.substr(colon + 1);
          continue;
        }
        const algo::Id id = reg.named(entry);
        if (id == algo::kOneShot) {
          // Bare, it names the kernel for AllReduce, AllGather and ReduceScatter; Broadcast,
          // Reduce and AllToAll take it only as "Broadcast:oneshot", "Reduce:oneshot" and
          // "AllToAll:oneshot".
          if (reg.at(id).implements(c) && c != Collective::Broadcast && c != Collective::Reduce &&
              c != Collective::AllToAll)
            named = entry;
        } else if (id == algo::kCopyEngine) {
          if (reg.at(id).implements(c) && shape_.nranks <= reg.at(id).max_ranks()) named = entry;
        } else if (id != algo::kNone) {
          if (reg.at(id).implements(c)) named = entry;  // a hand-built plan the collective has
        } else if (algorithm_collective(entry, shape_.nranks) == c) {
          named = entry;
        }
      }
    } catch (const Error& e) {
      algo_error_[index_of(c)] = e.what();
      algo_error_code_[index_of(c)] = e.code();
      continue;
    }
    if (named.empty()) continue;
    Named& n = named_[index_of(c)];
    n.fixed = reg.named(named);
    if (n.fixed != algo::kNone) continue;
    for (const SelectionRow& r : table_->rows)
      n.by_row.push_back(
          algo::registry().compiled(named, env_.scheduler.empty() ? r.scheduler : env_.scheduler, r.allocator));
  }
}

const SelectionRow& Decider::row(const Call& call, bool plans_only) const {
  const SelectionRow* r = table_->match(call.collective, call.bytes, shape_.nranks, call.in_place, plans_only);
  if (r == nullptr) table_->no_row(call.collective, call.bytes, shape_.nranks, call.in_place, plans_only);
  return *r;
}

Chosen Decider::from_row(const SelectionRow& r, const Call& call) const {
  Chosen ch;
  ch.algorithm = r.algorithm_id;
  ch.row = &r;
  ch.instances = r.instances_for(call.collective, call.bytes, shape_.nranks);
  if (r.algorithm_id == algo::kOneShot) {  // LL by nature, its own blocks, no micro-batches
    ch.protocol = algo::Protocol::LL;
    return ch;
  }
  ch.protocol = r.proto;
  ch.microbatch_bytes = r.microbatch_bytes;
  ch.plan_executor = r.plan_executor;
  return ch;
}

Chosen Decider::chosen(const Call& call) const { return choose(call, true); }

Chosen Decider::choose(const Call& call, bool overrides) const {
  const Collective c = call.collective;
  Chosen ch = from_row(row(call, false), call);
  if (!overrides) return ch;
  const size_t ci = index_of(c);
  if (!algo_error_[ci].empty()) fail(algo_error_code_[ci], algo_error_[ci]);
  const Named& named = named_[ci];
  const bool named_oneshot = named.fixed == algo::kOneShot;
  if (named_oneshot && ch.algorithm != algo::kOneShot) {
    ch = Chosen{};
    ch.algorithm = algo::kOneShot;
    ch.protocol = algo::Protocol::LL;
    ch.instances = algo::oneshot_blocks(algo::peer_bytes(c, call.bytes, shape_.nranks));
  } else if (named.any() && !named_oneshot) {
    // Another algorithm named: the table's plan row gives protocol, instances and the rest.
    if (ch.algorithm == algo::kOneShot) ch = from_row(row(call, true), call);
    ch.algorithm = named.fixed != algo::kNone ? named.fixed
                                              : named.by_row[static_cast<size_t>(ch.row - table_->rows.data())];
  }
  if (!env_.proto.empty() && !proto_)
    fail(ErrorCode::InvalidArgument, "WEFT_PROTO='" + env_.proto + "' is not Simple, LL or LL128");
  // The one-shot kernel is LL by nature: a forced Simple or LL128 sends the table's oneshot
  // to the plans, as does a payload the kernel cannot hold.
  const bool forced_off = proto_ && *proto_ != algo::Protocol::LL && !named_oneshot;
  if (ch.algorithm == algo::kOneShot &&
      (forced_off || !algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, call.bytes, shape_.nranks, false})))
    ch = from_row(row(call, true), call);
  if (proto_ && ch.algorithm != algo::kOneShot) ch.protocol = *proto_;
  if (env_.instances > 0) ch.instances = static_cast<int32_t>(std::min<int64_t>(env_.instances, INT32_MAX));
  ch.instances = std::clamp(ch.instances, 1, std::max(1, shape_.connections));
  return ch;
}

Launch Decider::plan_launch(const Chosen& ch) const {
  Launch l;
  l.algorithm = ch.algorithm;
  l.chosen = ch.protocol;
  l.protocol = effective_protocol(ch.protocol, shape_.multi_node, shape_.slot_bytes, shape_.ll_slot_bytes, &l.note);
  l.instances = ch.instances;
  l.microbatch_bytes = env_.microbatch > 0 ? static_cast<uint64_t>(env_.microbatch) : ch.microbatch_bytes;
  // A row's executor wins over WEFT_EXECUTOR; links across nodes and LL128 always run the
  // interpreter (generated kernels have no network or LL128 instantiation).
  const bool gen = !shape_.multi_node && l.protocol != algo::Protocol::LL128 &&
                   (ch.plan_executor ? *ch.plan_executor == algo::Executor::Generated : env_.generated);
  l.executor = gen ? algo::Executor::Generated : algo::Executor::Interpreter;
  return l;
}

Decision Decider::decide(const Call& call) const {
  Decision d = decide_launch(call);
  window_engines(call, &d);
  if (shape_.cta_policy == kCtaEfficiency) {
    cap_for_efficiency(call, &d);
    if (d.executor == algo::Executor::CopyEngineExchange) cap_for_efficiency(call, &d.fallback);
  }
  return d;
}

bool Decider::window_engines(const Call& call, Decision* d) const {
  // Every input is the same on every rank (the policy, agreed; the payload; the window kind,
  // agreed at registration, the buffers at the same offsets by NCCL's contract), so every
  // rank decides alike.
  const bool zero = shape_.cta_policy == kCtaZero;
  if (!zero && call.window == WindowKind::None) return false;
  if (!zero_cta_collective(call.collective) || (!zero && call.bytes < kWindowCopyEngineBytes)) return false;
  // A Broadcast's payload leaves the root's copy engines at least once per phase: on 4 x H200
  // one phase (a copy per peer) ran at 0.36-0.55x NCCL from 2 MiB while the SM plans held
  // 0.77-0.84x (docs/results-2026-11-28.md, round 4). Beyond 2 ranks only the zero policy,
  // which asks for no SM, takes the copy engines for it (in two phases: exec/ce_direct.cpp).
  if (!zero && call.collective == Collective::Broadcast && shape_.nranks > 2) return false;
  if (!algo::registry().at(algo::kCopyEngine).supports(
          algo::CallShape{call.collective, call.bytes, shape_.nranks, shape_.multi_node}))
    return false;
  Decision ce;
  ce.algorithm = algo::kCopyEngine;
  ce.protocol = ce.chosen = algo::Protocol::Simple;
  ce.instances = 1;
  if (call.window == WindowKind::Symmetric) {
    ce.executor = algo::Executor::CopyEngineDirect;  // the peers' windows are mapped: nothing to agree on
  } else {
    // Default windows, or registered buffers under the zero policy: the exchange tells, and
    // where some rank cannot, every rank runs what the rules above chose.
    ce.executor = algo::Executor::CopyEngineExchange;
    ce.fallback = d->executor == algo::Executor::CopyEngineExchange ? d->fallback : static_cast<const Launch&>(*d);
  }
  *d = ce;
  return true;
}

void Decider::cap_for_efficiency(const Call& call, Launch* l) const {
  if (l->executor == algo::Executor::OneShot) {  // its instances are its thread blocks
    l->instances = std::min(l->instances, kEfficiencyBlocks);
    return;
  }
  if (l->executor != algo::Executor::Interpreter && l->executor != algo::Executor::Generated) return;
  // Blocks grow about in proportion to instances: a few rounds settle (each round counts the
  // plan at the new instances; every rank counts the same plans).
  for (int round = 0; round < 8 && l->instances > 1; ++round) {
    const int blocks = plan_blocks_ ? plan_blocks_(call, *l) : l->instances;
    const int next = efficiency_instances(l->instances, blocks);
    if (next == l->instances) return;
    l->instances = next;
  }
}

Decision Decider::decide_launch(const Call& call) const {
  Chosen ch = choose(call, env_.overrides());
  Decision d;
  const algo::Registry& reg = algo::registry();
  if (ch.algorithm == algo::kCopyEngine) {
    // Where every rank's receive buffer is registered (known only when the call runs); the
    // table's first plan row, without overrides, where some rank cannot.
    const Launch plans = plan_launch(from_row(row(call, true), call));
    if (!reg.at(algo::kCopyEngine).supports(algo::CallShape{call.collective, call.bytes, shape_.nranks, shape_.multi_node})) {
      static_cast<Launch&>(d) = plans;
      return d;
    }
    d.algorithm = algo::kCopyEngine;
    d.executor = algo::Executor::CopyEngineExchange;
    d.protocol = d.chosen = ch.protocol;
    d.instances = ch.instances;
    d.fallback = plans;
    return d;
  }
  if (ch.algorithm == algo::kOneShot && shape_.multi_node) {
    // Links to other nodes carry Simple messages through the proxy only: the one-shot
    // kernel, which stores into every peer's memory, does not run there.
    ch = from_row(row(call, true), call);
    if (env_.instances > 0) ch.instances = static_cast<int32_t>(std::min<int64_t>(env_.instances, shape_.connections));
  }
  if (ch.algorithm == algo::kOneShot) {
    d.algorithm = algo::kOneShot;
    d.executor = algo::Executor::OneShot;
    d.protocol = d.chosen = algo::Protocol::LL;
    d.instances = ch.instances;
    return d;
  }
  static_cast<Launch&>(d) = plan_launch(ch);
  return d;
}

algo::Protocol effective_protocol(algo::Protocol chosen, bool multi_node, uint64_t slot_bytes, uint64_t ll_slot_bytes,
                                  ProtocolNote* note) {
  ProtocolNote n = ProtocolNote::None;
  if (chosen != algo::Protocol::Simple && multi_node)
    n = ProtocolNote::AcrossNetwork;
  else if (chosen == algo::Protocol::LL128 &&
           (slot_bytes % device::kLL128LineBytes != 0 || ll_slot_bytes % device::kLL128LineBytes != 0))
    n = ProtocolNote::LL128Unaligned;
  if (note != nullptr) *note = n;
  return n == ProtocolNote::None ? chosen : algo::Protocol::Simple;
}

std::string describe(ProtocolNote note, algo::Protocol chosen, uint64_t slot_bytes, uint64_t ll_slot_bytes) {
  switch (note) {
    case ProtocolNote::None: return "";
    case ProtocolNote::AcrossNetwork:
      return std::string(algo::to_string(chosen)) +
             " runs as Simple across the network (it needs a packet's or line's data and flag to land together)";
    case ProtocolNote::LL128Unaligned:
      return "LL128 runs as Simple: WEFT_SLOT_BYTES (" + std::to_string(slot_bytes) + ") and WEFT_LL_SLOT_BYTES (" +
             std::to_string(ll_slot_bytes) + ") must be multiples of 128 for its lines to start on line boundaries";
  }
  return "";
}

namespace {

Choice named_choice(algo::Id id, algo::Protocol protocol, int instances, const SelectionRow* row) {
  const algo::Algorithm& a = algo::registry().at(id);
  if (id == algo::kOneShot) return Choice{a.name(), "LL", instances};
  Choice c;
  c.algorithm = a.name();
  c.protocol = std::string(algo::to_string(protocol));
  c.instances = instances;
  // A row's scheduler and allocator (a compiled source's are the row's by construction).
  if (row != nullptr) {
    c.scheduler = row->scheduler;
    c.allocator = row->allocator;
  } else if (a.plan_origin() == algo::PlanOrigin::Compiled) {
    c.scheduler = a.scheduler();
    c.allocator = a.allocator();
  }
  return c;
}

}  // namespace

Choice to_choice(const Chosen& ch) {
  Choice c = named_choice(ch.algorithm, ch.protocol, ch.instances, ch.row);
  if (ch.algorithm == algo::kOneShot) return c;
  c.microbatch_bytes = ch.microbatch_bytes;
  if (ch.row != nullptr) c.executor = ch.row->executor;
  return c;
}

Choice to_choice(const Launch& l) {
  Choice c = named_choice(l.algorithm, l.protocol, l.instances, nullptr);
  if (l.executor == algo::Executor::OneShot || l.executor == algo::Executor::CopyEngineExchange ||
      l.executor == algo::Executor::CopyEngineDirect)
    return c;
  c.microbatch_bytes = l.microbatch_bytes;
  if (l.executor == algo::Executor::Generated) c.executor = "gen";  // the interpreter goes unsaid
  return c;
}

std::string describe(const Launch& l) { return describe_choice(to_choice(l)); }

}  // namespace weft
