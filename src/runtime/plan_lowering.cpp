#include "runtime/plan_lowering.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

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

bool reads_src(Primitive p) { return exec::prim_reads_src(static_cast<int>(p)); }
bool writes_dst(Primitive p) { return exec::prim_writes_dst(static_cast<int>(p)); }

/// A slot's use of one connection, for matching the two ends.
struct EndUse {
  int32_t tb;
  int32_t slot;
  int32_t count;
  int32_t instance;
  int32_t instances;
};

}  // namespace

LoweredPlan lower_plan(const Plan& plan, int32_t nranks, int32_t max_pool) {
  LoweredPlan lp;
  lp.plan = plan;
  if (plan.num_ranks != nranks || static_cast<int32_t>(plan.ranks.size()) != nranks)
    fail(ErrorCode::Verify, "plan '" + plan.algorithm + "' is for " + std::to_string(plan.num_ranks) +
                                " ranks (" + std::to_string(plan.ranks.size()) + " rank plans), the communicator has " +
                                std::to_string(nranks));
  const int32_t R = nranks;
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
    if (lp.chunks[b] < 0) fail(ErrorCode::Verify, "plan: negative chunk count");
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

  // Per rank: slot numbering, then checks of every slot.
  std::vector<std::vector<int32_t>> slot_base(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    const RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
    if (rp.rank != r) fail(ErrorCode::Verify, "plan: rank plan " + std::to_string(r) + " says rank " + std::to_string(rp.rank));
    int32_t n = 0;
    for (const ThreadBlock& tb : rp.tbs) {
      slot_base[static_cast<size_t>(r)].push_back(n);
      n += static_cast<int32_t>(tb.slots.size());
    }
  }

  // Connection ends: (src rank, dst rank) -> key (channel, instance) -> uses at each end.
  using PairKey = std::tuple<int32_t, int32_t, int32_t, int32_t>;  // src, dst, channel, instance
  std::map<PairKey, std::vector<EndUse>> send_uses, recv_uses;

  for (int r = 0; r < R; ++r) {
    const RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
    for (size_t t = 0; t < rp.tbs.size(); ++t) {
      const auto& slots = rp.tbs[t].slots;
      for (size_t i = 0; i < slots.size(); ++i) {
        const Slot& s = slots[i];
        const std::string at = where(r, t, i);
        if (static_cast<int>(s.primitive) > static_cast<int>(Primitive::Nop))
          fail(ErrorCode::Verify, at + ": unknown primitive");
        if (s.count < 1) fail(ErrorCode::Verify, at + ": count " + std::to_string(s.count) + " is not positive");
        if (s.instances < 1 || s.instance < 0 || s.instance >= s.instances || s.instances > 4096)
          fail(ErrorCode::Verify, at + ": instance " + std::to_string(s.instance) + " of " + std::to_string(s.instances));
        auto check_range = [&](const BufferRange& br, const char* what) {
          int b = static_cast<int>(br.buffer);
          if (b < 0 || b > 2) fail(ErrorCode::Verify, at + ": unknown " + std::string(what) + " buffer");
          if (br.index < 0 || static_cast<int64_t>(br.index) + s.count > lp.chunks[b])
            fail(ErrorCode::Verify, at + ": " + what + " chunks " + std::to_string(br.index) + ".." +
                                        std::to_string(br.index + s.count - 1) + " of " +
                                        std::string(to_string(br.buffer)) + " are outside its " +
                                        std::to_string(lp.chunks[b]) + " chunk slots");
        };
        if (reads_src(s.primitive)) check_range(s.src, "source");
        if (writes_dst(s.primitive)) check_range(s.dst, "destination");
        if (primitive_sends(s.primitive)) {
          if (s.send_peer < 0 || s.send_peer >= R || s.send_peer == r)
            fail(ErrorCode::Verify, at + ": send peer " + std::to_string(s.send_peer) + " is not another rank");
          send_uses[{r, s.send_peer, s.channel, s.instance}].push_back(
              {static_cast<int32_t>(t), static_cast<int32_t>(i), s.count, s.instance, s.instances});
        }
        if (primitive_receives(s.primitive)) {
          if (s.recv_peer < 0 || s.recv_peer >= R || s.recv_peer == r)
            fail(ErrorCode::Verify, at + ": receive peer " + std::to_string(s.recv_peer) + " is not another rank");
          recv_uses[{s.recv_peer, r, s.channel, s.instance}].push_back(
              {static_cast<int32_t>(t), static_cast<int32_t>(i), s.count, s.instance, s.instances});
        }
        if (s.primitive == Primitive::RecvReduceCopy || s.primitive == Primitive::RecvReduceCopySend ||
            s.primitive == Primitive::RecvReduceSend || s.primitive == Primitive::Reduce)
          lp.has_reduction = true;
        for (const SlotDep& d : s.deps) {
          if (d.tb < 0 || d.tb >= static_cast<int32_t>(rp.tbs.size()) || d.slot < 0 ||
              d.slot >= static_cast<int32_t>(rp.tbs[static_cast<size_t>(d.tb)].slots.size()))
            fail(ErrorCode::Verify, at + ": depends on thread block " + std::to_string(d.tb) + " slot " +
                                        std::to_string(d.slot) + ", which does not exist");
          if (d.tb == static_cast<int32_t>(t) && d.slot >= static_cast<int32_t>(i))
            fail(ErrorCode::Verify, at + ": depends on slot " + std::to_string(d.slot) +
                                        " of its own thread block, which runs after it (deadlock)");
        }
      }
    }
  }

  // Both ends of every connection must exist, live on one thread block each, and agree.
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>> keys_of_pair;
  for (const auto& [key, sends] : send_uses) {
    auto [src, dst, channel, instance] = key;
    std::string conn = "connection " + std::to_string(src) + "->" + std::to_string(dst) + " (channel " +
                       std::to_string(channel) + ", instance " + std::to_string(instance) + ")";
    auto it = recv_uses.find(key);
    if (it == recv_uses.end())
      fail(ErrorCode::Verify, "plan: rank " + std::to_string(src) + " sends on " + conn + " but rank " +
                                  std::to_string(dst) + " never receives on it");
    const auto& recvs = it->second;
    if (sends.size() != recvs.size())
      fail(ErrorCode::Verify, "plan: " + conn + " carries " + std::to_string(sends.size()) +
                                  " slots at the sender but " + std::to_string(recvs.size()) + " at the receiver");
    for (size_t i = 0; i < sends.size(); ++i) {
      if (sends[i].tb != sends[0].tb || recvs[i].tb != recvs[0].tb)
        fail(ErrorCode::Verify, "plan: " + conn + " is used by more than one thread block at one end");
      if (sends[i].count != recvs[i].count || sends[i].instances != recvs[i].instances)
        fail(ErrorCode::Verify, "plan: " + conn + ", message " + std::to_string(i) + ": the sender (" +
                                    where(src, sends[i].tb, sends[i].slot) + ") moves " + std::to_string(sends[i].count) +
                                    " chunks in " + std::to_string(sends[i].instances) + " instances, the receiver (" +
                                    where(dst, recvs[i].tb, recvs[i].slot) + ") " + std::to_string(recvs[i].count) +
                                    " in " + std::to_string(recvs[i].instances));
      lp.comm_shapes.emplace_back(sends[i].count, sends[i].instances);
    }
    keys_of_pair[{src, dst}].push_back({channel, instance});
  }
  for (const auto& [key, recvs] : recv_uses)
    if (!send_uses.count(key))
      fail(ErrorCode::Verify, "plan: rank " + std::to_string(std::get<1>(key)) + " receives from rank " +
                                  std::to_string(std::get<0>(key)) + " on channel " + std::to_string(std::get<2>(key)) +
                                  ", instance " + std::to_string(std::get<3>(key)) + ", where nothing is sent");

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

  // Flatten.
  lp.ranks.resize(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    const RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
    LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
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
      exec::DevTB dtb{static_cast<int32_t>(lr.slots.size()), static_cast<int32_t>(rp.tbs[t].slots.size())};
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
          lr.deps.push_back(slot_base[static_cast<size_t>(r)][static_cast<size_t>(dep.tb)] + dep.slot);
          lr.dep_tbs.push_back(dep.tb);
        }
        lr.slots.push_back(d);
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
  return lp;
}

exec::Geometry make_geometry(const LoweredPlan& lp, uint64_t n, uint32_t elem_size, uint64_t cap_bytes,
                             uint64_t target_mb_bytes) {
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
    uint64_t per_chunk = cap_bytes / elem_size / static_cast<uint64_t>(count) / align * align;
    if (per_chunk == 0)
      fail(ErrorCode::InvalidUsage, "a staging slot of " + std::to_string(cap_bytes) + " bytes cannot hold one 16-byte "
                                    "piece of each of " + std::to_string(count) + " chunks (raise WEFT_SLOT_BYTES)");
    mb = std::min(mb, per_chunk * static_cast<uint64_t>(instances));
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

uint64_t scratch_bytes(const LoweredPlan& lp, const exec::Geometry& g) {
  return static_cast<uint64_t>(lp.chunks[2]) * g.stride * g.elem_size;
}

}  // namespace weft
