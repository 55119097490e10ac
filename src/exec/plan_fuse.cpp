#include "exec/plan_fuse.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace weft {

namespace {

using exec::DevSlot;

/// Whether `copy` copies exactly the elements `send` sends (plan_fuse.hpp says why these).
bool fusable(const LoweredPlan& lp, const DevSlot& send, const DevSlot& copy) {
  if (send.prim != exec::kSend || (send.flags & exec::kFusedCopy) != 0 || copy.prim != exec::kCopy) return false;
  if (copy.ndeps != 0 || send.src_buf != copy.src_buf || send.src_index != copy.src_index ||
      send.count != copy.count || send.instance != copy.instance || send.instances != copy.instances)
    return false;
  if (copy.src_buf == exec::kScratch || copy.dst_buf == exec::kScratch || copy.src_buf == copy.dst_buf) return false;
  const int32_t ks = lp.k[copy.src_buf], kd = lp.k[copy.dst_buf];
  return ks == kd && ks > 0 && copy.src_index % ks == copy.dst_index % kd;
}

void fuse_into(DevSlot& send, const DevSlot& copy) {
  send.flags |= exec::kFusedCopy;
  send.dst_buf = copy.dst_buf;
  send.dst_index = copy.dst_index;
}

/// Copy-send: a send and the copy right after it in the same thread block.
int32_t fuse_adjacent(const LoweredPlan& lp, LoweredRank& lr) {
  int32_t n = 0;
  for (const exec::DevTB& tb : lr.tbs)
    for (int32_t i = 0; i + 1 < tb.nslots; ++i) {
      DevSlot& send = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
      DevSlot& copy = lr.slots[static_cast<size_t>(tb.slot_begin + i + 1)];
      if (!fusable(lp, send, copy)) continue;
      fuse_into(send, copy);
      copy.prim = exec::kNop;  // keeps its counter (kHasDependents) for whoever waits on it
      ++n;
    }
  return n;
}

/// Removes thread block t of rank r (its slots have no dependents and no dependencies) from the
/// lowered arrays and from the plan, renumbering what comes after it.
void remove_block(LoweredPlan& lp, int32_t r, int32_t t) {
  LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
  const exec::DevTB gone = lr.tbs[static_cast<size_t>(t)];
  lr.slots.erase(lr.slots.begin() + gone.slot_begin, lr.slots.begin() + gone.slot_begin + gone.nslots);
  lr.tbs.erase(lr.tbs.begin() + t);
  for (exec::DevTB& tb : lr.tbs)
    if (tb.slot_begin > gone.slot_begin) tb.slot_begin -= gone.nslots;
  for (int32_t& d : lr.deps)
    if (d > gone.slot_begin) d -= gone.nslots;
  for (int32_t& d : lr.dep_tbs)
    if (d > t) --d;
  RankPlan& rp = lp.plan.ranks[static_cast<size_t>(r)];
  rp.tbs.erase(rp.tbs.begin() + t);
  for (ThreadBlock& tb : rp.tbs)
    for (Slot& s : tb.slots)
      for (SlotDep& d : s.deps)
        if (d.tb > t) --d.tb;
}

/// The send slots a copy could fold into, by what they send (buffer, first chunk, count,
/// instance, instances).
using SendKey = std::tuple<int, int32_t, int32_t, int, int>;
SendKey send_key(const DevSlot& s) { return {s.src_buf, s.src_index, s.count, s.instance, s.instances}; }

/// Fold: copy-only thread blocks whose every copy matches a send of another block.
int32_t fold_copy_blocks(LoweredPlan& lp, int32_t r) {
  LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
  int32_t n = 0;
  for (int32_t t = static_cast<int32_t>(lr.tbs.size()) - 1; t >= 0; --t) {
    const exec::DevTB tb = lr.tbs[static_cast<size_t>(t)];
    if (tb.nslots == 0) continue;
    const DevSlot& first = lr.slots[static_cast<size_t>(tb.slot_begin)];
    if (first.prim != exec::kCopy) continue;
    std::map<SendKey, std::vector<int32_t>> sends;  // slot indices outside block t
    for (int32_t s = 0; s < static_cast<int32_t>(lr.slots.size()); ++s)
      if (lr.slots[static_cast<size_t>(s)].prim == exec::kSend && (s < tb.slot_begin || s >= tb.slot_begin + tb.nslots))
        sends[send_key(lr.slots[static_cast<size_t>(s)])].push_back(s);
    std::vector<int32_t> into;  // the send each copy folds into
    for (int32_t i = 0; i < tb.nslots; ++i) {
      const DevSlot& copy = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
      if (copy.prim != exec::kCopy || copy.ndeps != 0 || (copy.flags & exec::kHasDependents) != 0) break;
      auto it = sends.find(send_key(copy));
      if (it == sends.end()) break;
      for (int32_t s : it->second)
        if (std::find(into.begin(), into.end(), s) == into.end() && fusable(lp, lr.slots[static_cast<size_t>(s)], copy)) {
          into.push_back(s);
          break;
        }
      if (static_cast<int32_t>(into.size()) != i + 1) break;
    }
    if (static_cast<int32_t>(into.size()) != tb.nslots) continue;
    for (int32_t i = 0; i < tb.nslots; ++i)
      fuse_into(lr.slots[static_cast<size_t>(into[static_cast<size_t>(i)])],
                lr.slots[static_cast<size_t>(tb.slot_begin + i)]);
    remove_block(lp, r, t);
    ++n;
  }
  return n;
}

/// Dead scratch: rrcs into scratch chunks that no slot of the rank reads.
int32_t drop_dead_scratch(const LoweredPlan& lp, LoweredRank& lr) {
  std::vector<bool> read(static_cast<size_t>(std::max(0, lp.chunks[exec::kScratch])), false);
  auto mark = [&](int32_t first, int32_t count) {
    for (int32_t j = first; j < first + count; ++j)
      if (j >= 0 && j < static_cast<int32_t>(read.size())) read[static_cast<size_t>(j)] = true;
  };
  for (const DevSlot& s : lr.slots) {
    if (exec::prim_reads_src(s.prim) && s.src_buf == exec::kScratch) mark(s.src_index, s.count);
    if (s.prim == exec::kReduce && s.dst_buf == exec::kScratch) mark(s.dst_index, s.count);  // dst := dst (+) src
  }
  int32_t n = 0;
  for (DevSlot& s : lr.slots) {
    if (s.prim != exec::kRecvReduceCopySend || s.dst_buf != exec::kScratch) continue;
    bool used = false;
    for (int32_t j = s.dst_index; j < s.dst_index + s.count; ++j)
      used |= j < 0 || j >= static_cast<int32_t>(read.size()) || read[static_cast<size_t>(j)];
    if (used) continue;
    s.prim = exec::kRecvReduceSend;
    ++n;
  }
  return n;
}

}  // namespace

FuseReport fuse_copies(LoweredPlan& lp) {
  FuseReport rep;
  for (int32_t r = 0; r < static_cast<int32_t>(lp.ranks.size()); ++r) {
    LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
    rep.copy_sends += fuse_adjacent(lp, lr);
    rep.folded_blocks += fold_copy_blocks(lp, r);
    rep.dead_scratch += drop_dead_scratch(lp, lp.ranks[static_cast<size_t>(r)]);
  }
  return rep;
}

}  // namespace weft
