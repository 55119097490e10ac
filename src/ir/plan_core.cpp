#include "ir/plan_core.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "util/text.hpp"

namespace weft {

PlanIndex::PlanIndex(const Plan& p) : plan_(&p) {
  rank_tb.push_back(0);
  tb_base.push_back(0);
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    for (const ThreadBlock& tb : p.ranks[r].tbs) {
      tb_base.push_back(tb_base.back() + static_cast<int64_t>(tb.slots.size()));
      tb_rank.push_back(static_cast<int32_t>(r));
    }
    rank_tb.push_back(rank_tb.back() + static_cast<int32_t>(p.ranks[r].tbs.size()));
  }
  if (tb_base.back() > INT32_MAX - 1) fail(ErrorCode::InvalidArgument, "plan has more than 2^31 slots");
  tb_of.resize(static_cast<size_t>(tb_base.back()));
  for (size_t t = 0; t + 1 < tb_base.size(); ++t)
    std::fill(tb_of.begin() + tb_base[t], tb_of.begin() + tb_base[t + 1], static_cast<int32_t>(t));
}

PlanPairing pair_connections(const Plan& p, const PlanIndex& ix) {
  PlanPairing out;
  out.send_of.assign(static_cast<size_t>(ix.size()), -1);
  std::unordered_map<uint64_t, int32_t> index;
  uint64_t channels = 1;
  for (const RankPlan& rp : p.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) channels = std::max<uint64_t>(channels, static_cast<uint64_t>(s.channel) + 1);
  auto get = [&](int32_t src, int32_t dst, int32_t ch) -> PlanConnection& {
    uint64_t key = (static_cast<uint64_t>(src) * static_cast<uint64_t>(p.num_ranks) + static_cast<uint64_t>(dst)) * channels +
                   static_cast<uint64_t>(ch);
    auto [it, fresh] = index.emplace(key, static_cast<int32_t>(out.conns.size()));
    if (fresh) out.conns.push_back({src, dst, ch, -1, -1, {}, {}});
    return out.conns[static_cast<size_t>(it->second)];
  };
  for (int32_t id = 0; id < ix.size(); ++id) {
    const Slot& s = ix.slot(id);
    const int32_t r = ix.rank(id), tb = ix.local_tb(id);
    if (primitive_sends(s.primitive)) {
      PlanConnection& e = get(r, s.send_peer, s.channel);
      if (e.send_tb >= 0 && e.send_tb != tb) {
        out.fault = text::format("connection %d->%d channel %d is driven by thread blocks %d and %d of rank %d", r,
                                 s.send_peer, s.channel, e.send_tb, tb, r);
        return out;
      }
      e.send_tb = tb;
      e.sends.push_back(id);
    }
    if (primitive_receives(s.primitive)) {
      PlanConnection& e = get(s.recv_peer, r, s.channel);
      if (e.recv_tb >= 0 && e.recv_tb != tb) {
        out.fault = text::format("connection %d->%d channel %d is received by thread blocks %d and %d of rank %d",
                                 s.recv_peer, r, s.channel, e.recv_tb, tb, r);
        return out;
      }
      e.recv_tb = tb;
      e.recvs.push_back(id);
    }
  }
  for (const PlanConnection& e : out.conns) {
    if (e.sends.size() != e.recvs.size()) {
      out.fault = text::format("connection %d->%d channel %d has %zu sends but %zu receives", e.src, e.dst, e.channel,
                               e.sends.size(), e.recvs.size());
      return out;
    }
    for (size_t i = 0; i < e.sends.size(); ++i) {
      const Slot& a = ix.slot(e.sends[i]);
      const Slot& b = ix.slot(e.recvs[i]);
      if (a.count != b.count || a.instance != b.instance || a.instances != b.instances) {
        out.fault = text::format("connection %d->%d channel %d: transfer %zu is sent as %d chunks (instance %d of %d) "
                                 "by %s but received as %d chunks (instance %d of %d) by %s",
                                 e.src, e.dst, e.channel, i, a.count, a.instance, a.instances,
                                 describe(slot_ref(ix, e.sends[i])).c_str(), b.count, b.instance, b.instances,
                                 describe(slot_ref(ix, e.recvs[i])).c_str());
        return out;
      }
      out.send_of[static_cast<size_t>(e.recvs[i])] = e.sends[i];
    }
  }
  return out;
}

PlanPairing pair_connections_or_throw(const Plan& plan, const PlanIndex& ix) {
  PlanPairing pairing = pair_connections(plan, ix);
  if (!pairing.fault.empty()) fail(ErrorCode::Verify, "plan: " + pairing.fault);
  return pairing;
}

namespace {
void validate_links(const Plan& p);
}  // namespace

void validate_plan(const Plan& p) {
  auto bad = [](const std::string& what) { fail(ErrorCode::Verify, "plan: " + what); };
  if (p.num_ranks <= 0) bad("num_ranks must be positive");
  if (p.input_chunks < 0 || p.output_chunks < 0 || p.scratch_chunks < 0) bad("chunk counts must not be negative");
  if (p.num_subpipelines < 0) bad("num_subpipelines must not be negative");
  if (static_cast<int32_t>(p.ranks.size()) != p.num_ranks)
    bad(text::format("%zu rank entries for %d ranks", p.ranks.size(), p.num_ranks));
  auto chunks = [&](Buffer b) { return b == Buffer::Input ? p.input_chunks : b == Buffer::Output ? p.output_chunks : p.scratch_chunks; };
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    const RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    if (rp.rank != r) bad(text::format("rank entry %d says rank %d", r, rp.rank));
    for (size_t t = 0; t < rp.tbs.size(); ++t)
      for (size_t i = 0; i < rp.tbs[t].slots.size(); ++i) {
        const Slot& s = rp.tbs[t].slots[i];
        auto at = [&](const std::string& what) {
          fail(ErrorCode::Verify, text::format("plan: rank %d, thread block %zu, slot %zu (%s): ", r, t, i,
                                               std::string(to_string(s.primitive)).c_str()) + what);
        };
        if (static_cast<int>(s.primitive) > static_cast<int>(Primitive::Nop)) at("unknown primitive");
        const bool sends = primitive_sends(s.primitive), recvs = primitive_receives(s.primitive);
        if (sends && (s.send_peer < 0 || s.send_peer >= p.num_ranks || s.send_peer == r))
          at(text::format("send peer %d is not another rank in [0, %d)", s.send_peer, p.num_ranks));
        if (!sends && s.send_peer != -1) at(text::format("send peer %d on a primitive that does not send", s.send_peer));
        if (recvs && (s.recv_peer < 0 || s.recv_peer >= p.num_ranks || s.recv_peer == r))
          at(text::format("receive peer %d is not another rank in [0, %d)", s.recv_peer, p.num_ranks));
        if (!recvs && s.recv_peer != -1) at(text::format("receive peer %d on a primitive that does not receive", s.recv_peer));
        if (s.channel < 0) at("channel must not be negative");
        if (s.count < 1) at(text::format("count %d must be at least 1", s.count));
        if (s.instances < 1 || s.instance < 0 || s.instance >= s.instances)
          at(text::format("instance %d of %d is out of range", s.instance, s.instances));
        if (s.subpipeline < 0) at("subpipeline must not be negative");
        for (const BufferRange* br : {&s.src, &s.dst}) {
          if (static_cast<int>(br->buffer) > 2) at("unknown buffer");
          if (br->index < 0 || static_cast<int64_t>(br->index) + s.count > chunks(br->buffer))
            at(text::format("chunks [%d, %d) of the %s buffer are out of range [0, %d)", br->index, br->index + s.count,
                            std::string(to_string(br->buffer)).c_str(), chunks(br->buffer)));
        }
        for (const SlotDep& d : s.deps) {
          if (d.tb < 0 || d.tb >= static_cast<int32_t>(rp.tbs.size()) || d.slot < 0 ||
              d.slot >= static_cast<int32_t>(rp.tbs[static_cast<size_t>(d.tb)].slots.size()))
            at(text::format("depends on thread block %d, slot %d, which does not exist", d.tb, d.slot));
          // The one rule: an earlier slot of the same block is implied by program order (as
          // MSCCL allows); itself or a later one can never be met.
          if (d.tb == static_cast<int32_t>(t) && d.slot >= static_cast<int32_t>(i))
            at(text::format("depends on slot %d of its own thread block, which does not run before it", d.slot));
        }
      }
  }
  validate_links(p);
}

std::vector<std::pair<int32_t, int32_t>> sending_pairs(const Plan& p) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const RankPlan& rp : p.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots)
        if (primitive_sends(s.primitive)) out.emplace_back(rp.rank, s.send_peer);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

void validate_links(const Plan& p) {
  if (p.links.empty()) return;
  auto bad = [](const std::string& what) { fail(ErrorCode::Verify, "plan: links: " + what); };
  const auto pairs = sending_pairs(p);
  for (size_t i = 0; i < p.links.size(); ++i) {
    const PlanLink& l = p.links[i];
    if (l.src < 0 || l.src >= p.num_ranks || l.dst < 0 || l.dst >= p.num_ranks || l.src == l.dst)
      bad(text::format("entry %zu (%d -> %d) is not a pair of distinct ranks in [0, %d)", i, l.src, l.dst, p.num_ranks));
    if (static_cast<int>(l.channel) > static_cast<int>(ChannelKind::PortNetwork)) bad(text::format("entry %zu has an unknown channel", i));
    if (i > 0 && std::make_pair(p.links[i - 1].src, p.links[i - 1].dst) >= std::make_pair(l.src, l.dst))
      bad(text::format("entry %zu (%d -> %d) is out of (src, dst) order or repeated", i, l.src, l.dst));
    if (!std::binary_search(pairs.begin(), pairs.end(), std::make_pair(l.src, l.dst)))
      bad(text::format("entry %zu (%d -> %d) names a pair no slot sends over", i, l.src, l.dst));
  }
  if (p.links.size() != pairs.size())
    for (const auto& pair : pairs) {
      const int s = pair.first, d = pair.second;  // named copies: clang 14 cannot capture bindings
      if (std::none_of(p.links.begin(), p.links.end(), [&](const PlanLink& l) { return l.src == s && l.dst == d; }))
        bad(text::format("rank %d sends to rank %d but no entry gives that pair's channel", s, d));
    }
}

}  // namespace

std::vector<PlanLink> choose_links(const Plan& p, const Topology& t) {
  std::vector<PlanLink> out;
  for (const auto& [s, d] : sending_pairs(p)) {
    PlanLink l{s, d, ChannelKind::Memory};
    if (s < t.num_gpus() && d < t.num_gpus()) {
      if (!t.same_node(s, d)) l.channel = ChannelKind::PortNetwork;
      else if (t.intra_node_link == "pcie") l.channel = ChannelKind::PortCopyEngine;
    }
    out.push_back(l);
  }
  return out;
}

PlanSlotRef slot_ref(const PlanIndex& ix, int32_t id) {
  const Slot& s = ix.slot(id);
  return {ix.rank(id), ix.local_tb(id), ix.index(id), s.primitive, s.send_peer >= 0 ? s.send_peer : s.recv_peer};
}

std::string describe(const PlanSlotRef& e) {
  std::string s = text::format("rank %d tb %d slot %d (%s", e.rank, e.tb, e.slot, std::string(to_string(e.primitive)).c_str());
  if (e.peer >= 0) s += text::format(primitive_sends(e.primitive) ? " to %d" : " from %d", e.peer);
  return s + ")";
}

}  // namespace weft
