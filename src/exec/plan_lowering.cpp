#include "exec/plan_lowering.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "ir/plan_core.hpp"
#include "util/error.hpp"

namespace weft {

static_assert(static_cast<int>(Primitive::Send) == exec::kSend);
static_assert(static_cast<int>(Primitive::Recv) == exec::kRecv);
static_assert(static_cast<int>(Primitive::RecvReduceCopy) == exec::kRecvReduceCopy);
static_assert(static_cast<int>(Primitive::RecvCopySend) == exec::kRecvCopySend);
static_assert(static_cast<int>(Primitive::RecvReduceCopySend) == exec::kRecvReduceCopySend);
static_assert(static_cast<int>(Primitive::RecvReduceSend) == exec::kRecvReduceSend);
static_assert(static_cast<int>(Primitive::Copy) == exec::kCopy);
static_assert(static_cast<int>(Primitive::Reduce) == exec::kReduce);
static_assert(static_cast<int>(Primitive::Nop) == exec::kNop);
static_assert(static_cast<int>(Buffer::Input) == exec::kInput);
static_assert(static_cast<int>(Buffer::Output) == exec::kOutput);
static_assert(static_cast<int>(Buffer::Scratch) == exec::kScratch);

namespace {

std::string where(int rank, size_t tb, size_t slot) {
  return "plan: rank " + std::to_string(rank) + ", thread block " + std::to_string(tb) + ", slot " +
         std::to_string(slot);
}

using PairKey = std::tuple<int32_t, int32_t, int32_t, int32_t>;  // src, dst, channel, instance

/// Each buffer's chunk slots, groups and chunk slots per group.
void cut_buffers(const Plan& plan, int32_t R, LoweredPlan& lp) {
  lp.chunks[0] = plan.input_chunks;
  lp.chunks[1] = plan.output_chunks;
  lp.chunks[2] = plan.scratch_chunks;
  switch (plan.collective) {
    case Collective::AllGather: lp.groups[1] = R; break;
    case Collective::ReduceScatter: lp.groups[0] = R; break;
    case Collective::AllToAll: lp.groups[0] = lp.groups[1] = R; break;
    default: break;
  }
  for (int b = 0; b < 2; ++b) {
    if (lp.chunks[b] % lp.groups[b] != 0)
      fail(ErrorCode::Verify, "plan '" + plan.algorithm + "': " + std::string(to_string(static_cast<Buffer>(b))) +
                                  " has " + std::to_string(lp.chunks[b]) + " chunk slots, not a multiple of " +
                                  std::to_string(lp.groups[b]) + " groups");
    lp.k[b] = std::max(1, lp.chunks[b] / lp.groups[b]);
  }
  if (lp.chunks[0] > 0 && lp.chunks[1] > 0 && lp.k[0] != lp.k[1])
    fail(ErrorCode::Verify, "plan '" + plan.algorithm + "': input and output cut their groups into different numbers "
                            "of chunk slots (" + std::to_string(lp.k[0]) + " and " + std::to_string(lp.k[1]) + ")");
  lp.k[2] = 1;
}

/// Pool keys: per ordered pair of ranks, the distinct (channel, instance) of its messages,
/// numbered in order; at most `max_pool` per pair (the communicator's connections).
std::map<PairKey, int32_t> pool_indices(const Plan& plan, const PlanIndex& ix, const PlanPairing& pairing,
                                        int32_t max_pool, LoweredPlan& lp) {
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>> keys_of_pair;
  for (const PlanConnection& c : pairing.conns)
    for (int32_t id : c.sends) {
      const Slot& s = ix.slot(id);
      lp.comm_shapes.emplace_back(s.count, s.instances);
      auto& keys = keys_of_pair[{c.src, c.dst}];
      if (std::find(keys.begin(), keys.end(), std::pair{c.channel, s.instance}) == keys.end())
        keys.push_back({c.channel, s.instance});
    }
  std::map<PairKey, int32_t> pool_index;
  for (auto& [pair, keys] : keys_of_pair) {
    std::sort(keys.begin(), keys.end());
    if (static_cast<int32_t>(keys.size()) > max_pool)
      fail(ErrorCode::InvalidUsage, "plan '" + plan.algorithm + "' uses " + std::to_string(keys.size()) +
                                        " connections from rank " + std::to_string(pair.first) + " to rank " +
                                        std::to_string(pair.second) + ", more than the " + std::to_string(max_pool) +
                                        " the communicator has (WEFT_CONNECTIONS)");
    lp.pool_needed = std::max(lp.pool_needed, static_cast<int32_t>(keys.size()));
    for (size_t i = 0; i < keys.size(); ++i)
      pool_index[{pair.first, pair.second, keys[i].first, keys[i].second}] = static_cast<int32_t>(i);
  }
  return pool_index;
}

/// Rank r's thread blocks, slots, dependencies and connection table as flat arrays.
void flatten_rank(const Plan& plan, const PlanIndex& ix, const std::map<PairKey, int32_t>& pool_index, int r,
                  LoweredRank& lr) {
  const RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
  std::map<std::pair<bool, int32_t>, int16_t> conn_of;  // (send?, pool key) -> table index
  auto conn_index = [&](bool send, int32_t peer, int32_t pool) -> int16_t {
    int32_t key = peer * 65536 + pool;
    auto it = conn_of.find({send, key});
    if (it != conn_of.end()) return it->second;
    if (lr.conns.size() >= 32767) fail(ErrorCode::Verify, "plan: rank " + std::to_string(r) + " has too many connections");
    int16_t idx = static_cast<int16_t>(lr.conns.size());
    lr.conns.push_back({peer, send, pool});
    conn_of[{send, key}] = idx;
    return idx;
  };
  for (size_t t = 0; t < rp.tbs.size(); ++t) {
    exec::DevTB dtb{static_cast<int32_t>(lr.slots.size()), static_cast<int32_t>(rp.tbs[t].slots.size()),
                    static_cast<int32_t>(lr.conns.size()), 0};
    lr.tbs.push_back(dtb);
    for (const Slot& s : rp.tbs[t].slots) {
      exec::DevSlot d{};
      d.prim = static_cast<uint8_t>(s.primitive);
      d.src_buf = static_cast<uint8_t>(s.src.buffer);
      d.dst_buf = static_cast<uint8_t>(s.dst.buffer);
      d.src_index = s.src.index;
      d.dst_index = s.dst.index;
      d.count = s.count;
      d.instance = static_cast<int16_t>(s.instance);
      d.instances = static_cast<int16_t>(s.instances);
      d.send_conn = -1;
      d.recv_conn = -1;
      if (primitive_sends(s.primitive))
        d.send_conn = conn_index(true, s.send_peer, pool_index.at({r, s.send_peer, s.channel, s.instance}));
      if (primitive_receives(s.primitive))
        d.recv_conn = conn_index(false, s.recv_peer, pool_index.at({s.recv_peer, r, s.channel, s.instance}));
      d.dep_begin = static_cast<int32_t>(lr.deps.size());
      d.ndeps = static_cast<int32_t>(s.deps.size());
      for (const SlotDep& dep : s.deps) {
        lr.deps.push_back(ix.id(r, dep.tb, dep.slot) - ix.id(r, 0, 0));
        lr.dep_tbs.push_back(dep.tb);
      }
      lr.slots.push_back(d);
    }
    // A connection end has one thread block (validate_plan), so the ends first used here
    // are all this thread block uses: a contiguous run of the table (DevTB's comment).
    exec::DevTB& tbr = lr.tbs.back();
    tbr.nconns = static_cast<int32_t>(lr.conns.size()) - tbr.conn_begin;
    for (int32_t i = 0; i < tbr.nslots; ++i) {
      const exec::DevSlot& d = lr.slots[static_cast<size_t>(tbr.slot_begin + i)];
      for (int32_t c : {static_cast<int32_t>(d.send_conn), static_cast<int32_t>(d.recv_conn)})
        if (c >= 0 && (c < tbr.conn_begin || c >= tbr.conn_begin + tbr.nconns))
          fail(ErrorCode::Verify, where(r, t, static_cast<size_t>(i)) + ": its connection end is also driven by an "
                                                                      "earlier thread block of the rank");
    }
  }
  // Counters are bumped only where someone waits. A block that waits reads its launch's
  // base from a bumped counter of its own, so its first slot is bumped too (every bumped
  // counter grows by the micro-batch count per launch: they all hold the same value).
  for (int32_t dep : lr.deps) lr.slots[static_cast<size_t>(dep)].flags |= exec::kHasDependents;
  for (const exec::DevTB& tb : lr.tbs) {
    bool waits = false;
    for (int32_t i = 0; i < tb.nslots; ++i) waits |= lr.slots[static_cast<size_t>(tb.slot_begin + i)].ndeps > 0;
    if (waits) lr.slots[static_cast<size_t>(tb.slot_begin)].flags |= exec::kHasDependents;
  }
}

}  // namespace

LoweredPlan lower_plan(const Plan& plan, int32_t nranks, int32_t max_pool) {
  LoweredPlan lp;
  lp.plan = plan;
  if (plan.num_ranks != nranks || static_cast<int32_t>(plan.ranks.size()) != nranks)
    fail(ErrorCode::Verify, "plan '" + plan.algorithm + "' is for " + std::to_string(plan.num_ranks) +
                                " ranks (" + std::to_string(plan.ranks.size()) + " rank plans), the communicator has " +
                                std::to_string(nranks));
  validate_plan(plan);
  cut_buffers(plan, nranks, lp);

  // The structural rules and the pairing of connection ends are the core's (ir/plan_core.hpp);
  // what is checked here is the executor's own limits.
  const PlanIndex ix(plan);
  const PlanPairing pairing = pair_connections_or_throw(plan, ix);
  for (int32_t id = 0; id < ix.size(); ++id) {
    const Slot& s = ix.slot(id);
    if (s.instances > 4096)
      fail(ErrorCode::Verify, where(ix.rank(id), static_cast<size_t>(ix.local_tb(id)), static_cast<size_t>(ix.index(id))) +
                                  ": " + std::to_string(s.instances) + " instances, more than the executor's 4096");
    lp.has_reduction |= primitive_info(s.primitive).reduces;
  }
  const std::map<PairKey, int32_t> pool_index = pool_indices(plan, ix, pairing, max_pool, lp);
  lp.ranks.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) flatten_rank(plan, ix, pool_index, r, lp.ranks[static_cast<size_t>(r)]);
  return lp;
}

exec::Geometry make_geometry(const LoweredPlan& lp, uint64_t n, uint32_t elem_size, uint64_t cap_bytes,
                             uint64_t target_mb_bytes, exec::Protocol protocol, uint32_t min_nmb,
                             uint64_t min_cut_piece_bytes) {
  if (elem_size == 0 || elem_size > 16 || (elem_size & (elem_size - 1)) != 0)
    fail(ErrorCode::InvalidArgument, "element size " + std::to_string(elem_size) + " is not 1, 2, 4, 8 or 16 bytes");
  exec::Geometry g;
  g.n = n;
  g.elem_size = elem_size;
  for (int b = 0; b < 3; ++b) g.k[b] = lp.k[b];
  const uint64_t align = elem_size >= 16 ? 1 : 16 / elem_size;
  const uint64_t k = static_cast<uint64_t>(std::max(lp.k[0], lp.k[1]));
  uint64_t stride = (n + k - 1) / k;
  stride = std::max<uint64_t>(align, (stride + align - 1) / align * align);
  g.stride = stride;
  uint64_t mb = stride;
  if (target_mb_bytes > 0) mb = std::min(mb, std::max<uint64_t>(align, target_mb_bytes / elem_size / align * align));
  for (const auto& [count, instances] : lp.comm_shapes) {
    uint64_t piece_bytes = cap_bytes / static_cast<uint64_t>(count);
    if (protocol == exec::kLL128) piece_bytes = piece_bytes / device::kLL128LineBytes * device::kLL128DataBytes;
    uint64_t per_chunk = piece_bytes / elem_size / align * align;
    if (per_chunk == 0)
      fail(ErrorCode::InvalidUsage, "a staging slot of " + std::to_string(cap_bytes) + " bytes cannot hold one 16-byte "
                                    "piece of each of " + std::to_string(count) + " chunks (raise WEFT_SLOT_BYTES)");
    mb = std::min(mb, per_chunk * static_cast<uint64_t>(instances));
  }
  // At least min_nmb micro-batches per chunk slot (a window of them, WEFT_MB_WINDOW) where the
  // chunk allows, and where every thread block's piece keeps min_cut_piece_bytes.
  if (min_nmb > 1) {
    const uint64_t cut = (stride + min_nmb - 1) / min_nmb + align - 1;
    int32_t most = 1;
    for (const auto& [count, instances] : lp.comm_shapes) most = std::max(most, instances);
    if (cut / static_cast<uint64_t>(most) * elem_size >= min_cut_piece_bytes) mb = std::min(mb, cut);
  }
  mb = std::max<uint64_t>(align, mb / align * align);
  g.mb = mb;
  const uint64_t nmb = (stride + mb - 1) / mb;
  if (nmb > UINT32_MAX)
    fail(ErrorCode::InvalidArgument, std::to_string(n) + " elements need " + std::to_string(nmb) +
                                         " micro-batches per chunk, more than 2^32 (raise WEFT_SLOT_BYTES)");
  g.nmb = static_cast<uint32_t>(nmb);
  return g;
}

exec::Protocol protocol_code(const std::string& name) {
  if (name == "Simple") return exec::kSimple;
  if (name == "LL") return exec::kLL;
  if (name == "LL128") return exec::kLL128;
  fail(ErrorCode::InvalidArgument, "unknown protocol '" + name + "' (known: Simple, LL, LL128)");
}

uint64_t scratch_bytes(const LoweredPlan& lp, const exec::Geometry& g) {
  return static_cast<uint64_t>(lp.chunks[2]) * g.stride * g.elem_size;
}

RoleGroups group_thread_blocks(const LoweredRank& lr, int32_t max_roles, int32_t target_blocks) {
  RoleGroups g;
  const int32_t ntbs = static_cast<int32_t>(lr.tbs.size());
  g.blocks = ntbs;
  max_roles = std::clamp(max_roles, 1, exec::kMaxBlockRoles);
  if (target_blocks < 1 || ntbs <= target_blocks || max_roles == 1 || ntbs > 32767) return g;
  g.roles = std::min(max_roles, (ntbs + target_blocks - 1) / target_blocks);
  // Which thread blocks depend on which (either way), from the slots' dependencies.
  std::vector<int32_t> tb_of_slot(lr.slots.size());
  for (int32_t t = 0; t < ntbs; ++t)
    for (int32_t i = 0; i < lr.tbs[static_cast<size_t>(t)].nslots; ++i)
      tb_of_slot[static_cast<size_t>(lr.tbs[static_cast<size_t>(t)].slot_begin + i)] = t;
  std::vector<std::vector<bool>> dep(static_cast<size_t>(ntbs), std::vector<bool>(static_cast<size_t>(ntbs), false));
  for (int32_t t = 0; t < ntbs; ++t) {
    const exec::DevTB& tb = lr.tbs[static_cast<size_t>(t)];
    for (int32_t i = 0; i < tb.nslots; ++i) {
      const exec::DevSlot& s = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
      for (int32_t d = 0; d < s.ndeps; ++d) {
        const int32_t u = tb_of_slot[static_cast<size_t>(lr.deps[static_cast<size_t>(s.dep_begin + d)])];
        dep[static_cast<size_t>(t)][static_cast<size_t>(u)] = dep[static_cast<size_t>(u)][static_cast<size_t>(t)] = true;
      }
    }
  }
  // Order: first connection (peer, pool index), then senders before receivers, then index.
  struct Key {
    int32_t peer, pool, role, tb;
    bool operator<(const Key& o) const { return std::tie(peer, pool, role, tb) < std::tie(o.peer, o.pool, o.role, o.tb); }
  };
  std::vector<Key> order;
  for (int32_t t = 0; t < ntbs; ++t) {
    Key k{INT32_MAX, INT32_MAX, 2, t};  // thread blocks without a connection go last
    const exec::DevTB& tb = lr.tbs[static_cast<size_t>(t)];
    for (int32_t i = 0; i < tb.nslots && k.peer == INT32_MAX; ++i) {
      const exec::DevSlot& s = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
      const int16_t c = s.send_conn >= 0 ? s.send_conn : s.recv_conn;
      if (c < 0) continue;
      k.peer = lr.conns[static_cast<size_t>(c)].peer;
      k.pool = lr.conns[static_cast<size_t>(c)].pool_index;
      k.role = s.send_conn >= 0 ? 0 : 1;
    }
    order.push_back(k);
  }
  std::sort(order.begin(), order.end());
  std::vector<bool> placed(static_cast<size_t>(ntbs), false);
  std::vector<int16_t> members;
  g.tb_of.clear();
  for (size_t i = 0; i < order.size(); ++i) {
    if (placed[static_cast<size_t>(order[i].tb)]) continue;
    members.assign(1, static_cast<int16_t>(order[i].tb));
    placed[static_cast<size_t>(order[i].tb)] = true;
    for (size_t j = i + 1; j < order.size() && static_cast<int32_t>(members.size()) < g.roles; ++j) {
      const int32_t u = order[j].tb;
      if (placed[static_cast<size_t>(u)]) continue;
      bool free = true;
      for (int16_t m : members) free &= !dep[static_cast<size_t>(m)][static_cast<size_t>(u)];
      if (!free) continue;
      members.push_back(static_cast<int16_t>(u));
      placed[static_cast<size_t>(u)] = true;
    }
    members.resize(static_cast<size_t>(g.roles), -1);
    g.tb_of.insert(g.tb_of.end(), members.begin(), members.end());
  }
  g.blocks = static_cast<int32_t>(g.tb_of.size()) / g.roles;
  return g;
}

int exec_threads(const exec::Geometry& g, exec::Protocol protocol, int roles) {
  const int r = std::max(roles, 1);
  int per_role = exec::kExecBlockThreads / r / 32 * 32;
  if (protocol == exec::kLL) {
    // A piece is at most a micro-batch (one instance): its packets, four per thread.
    const uint64_t words = (g.mb * g.elem_size + 7) / 8;
    const uint64_t warps = std::max<uint64_t>(1, (words + 4 * 32 - 1) / (4 * 32));
    per_role = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(per_role), warps * 32));
  }
  return per_role * r;
}

}  // namespace weft
