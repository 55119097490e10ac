// Copy-engine collectives (plan/ce_plan.hpp) on the CPU: the plans, the programs (trigger
// sequences) they lower to, the lowering's refusals, and every program run on host memory
// through real proxies over in-process connections, ranks as threads, against the host
// reference: AllGather and AllReduce, 2 to 4 ranks, in place and out of place, several
// types and ops, poisoned outputs, several calls in a row on the same counters (as graph
// replays run).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "ir/plan_core.hpp"
#include "proxy/proxy.hpp"
#include "plan/ce_plan.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "tune/selection.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"
#include "weft/weft.h"

namespace weft::ce {
namespace {

std::vector<std::string> describe_all(const std::vector<Step>& prog) {
  std::vector<std::string> out;
  for (const Step& s : prog) out.push_back(describe(s));
  return out;
}

TEST(CePlan, EveryLinkIsPortCe) {
  for (Collective c : {Collective::AllGather, Collective::AllReduce})
    for (int R : {2, 3, 4, 8})
      for (bool in_place : {false, true}) {
        Plan p = ce_plan(c, R, in_place, c == Collective::AllReduce && R == 8 ? kMaxPieces : 1);
        ASSERT_EQ(p.links.size(), static_cast<size_t>(R * (R - 1)));
        for (const PlanLink& l : p.links) EXPECT_EQ(l.channel, ChannelKind::PortCopyEngine);
        EXPECT_NO_THROW(lower_ce_plan(p));
      }
  EXPECT_THROW(ce_plan(Collective::ReduceScatter, 2, false), Error);
  EXPECT_THROW(ce_plan(Collective::AllGather, 1, false), Error);
  EXPECT_THROW(ce_plan(Collective::AllGather, kMaxRanks + 1, false), Error);
}

TEST(CePlan, AllGatherTriggerSequence) {
  auto progs = lower_ce_plan(ce_plan(Collective::AllGather, 2, false));
  EXPECT_EQ(describe_all(progs[0]), (std::vector<std::string>{"signal rank 1", "wait rank 1",
                                                              "put in[0..1) -> rank 1 out[0..1)",
                                                              "copy in[0..1) -> out[0..1)", "wait rank 1", "flush"}));
  // In place on 3 ranks: rank 1 sends its own output chunk to both peers, no local copy.
  progs = lower_ce_plan(ce_plan(Collective::AllGather, 3, true));
  EXPECT_EQ(describe_all(progs[1]),
            (std::vector<std::string>{"signal rank 0", "signal rank 2", "wait rank 2", "put out[1..2) -> rank 2 out[1..2)",
                                      "wait rank 0", "put out[1..2) -> rank 0 out[1..2)", "wait rank 0", "wait rank 2",
                                      "flush"}));
}

TEST(CePlan, AllReduceTriggerSequence) {
  auto progs = lower_ce_plan(ce_plan(Collective::AllReduce, 2, false));
  // Reduce-scatter into the peer's scratch, wait for the peer's part, reduce (one fused
  // local run), all-gather the own chunk into the peer's output.
  EXPECT_EQ(describe_all(progs[0]),
            (std::vector<std::string>{"signal rank 1", "wait rank 1", "put in[1..2) -> rank 1 scratch[0..1)",
                                      "wait rank 1", "copy in[0..1) -> out[0..1)", "reduce scratch[0..1) into out[0..1)",
                                      "put out[0..1) -> rank 1 out[0..1)", "wait rank 1", "flush"}));
}

TEST(CePlan, AllReducePiecesOverlapCopiesAndReduction) {
  auto progs = lower_ce_plan(ce_plan(Collective::AllReduce, 2, false, 2));
  // Both pieces go out at once; piece 0 is reduced and sent on while piece 1 is in flight.
  EXPECT_EQ(describe_all(progs[0]),
            (std::vector<std::string>{"signal rank 1", "wait rank 1", "put in[2..3) -> rank 1 scratch[0..1)",
                                      "put in[3..4) -> rank 1 scratch[1..2)", "wait rank 1", "copy in[0..1) -> out[0..1)",
                                      "reduce scratch[0..1) into out[0..1)", "put out[0..1) -> rank 1 out[0..1)",
                                      "wait rank 1", "copy in[1..2) -> out[1..2)", "reduce scratch[1..2) into out[1..2)",
                                      "put out[1..2) -> rank 1 out[1..2)", "wait rank 1", "wait rank 1", "flush"}));
  // On 3 ranks, each piece's copy and both reductions wait for both peers' parts: one pass.
  progs = lower_ce_plan(ce_plan(Collective::AllReduce, 3, false, 2));
  const auto d = describe_all(progs[0]);
  auto at = [&](const std::string& s) { return std::find(d.begin(), d.end(), s) - d.begin(); };
  const auto copy0 = at("copy in[0..1) -> out[0..1)");
  ASSERT_LT(copy0, static_cast<long>(d.size()));
  EXPECT_EQ(d[static_cast<size_t>(copy0) - 1], "wait rank 1");
  EXPECT_EQ(d[static_cast<size_t>(copy0) - 2], "wait rank 2");
  EXPECT_EQ(d[static_cast<size_t>(copy0) + 1].substr(0, 7), "reduce ");
  EXPECT_EQ(d[static_cast<size_t>(copy0) + 2].substr(0, 7), "reduce ");
  EXPECT_THROW(ce_plan(Collective::AllReduce, 2, false, kMaxPieces + 1), Error);
  EXPECT_THROW(ce_plan(Collective::AllGather, 2, false, 2), Error);
  Geometry g = make_geometry(Collective::AllReduce, 2, 64 << 20, 4);  // 256 MiB
  EXPECT_EQ(g.pieces, kMaxPieces);
  EXPECT_EQ(make_geometry(Collective::AllReduce, 2, 1 << 20, 4).pieces, 1);
}

TEST(CePlan, RefusesWhatItCannotRun) {
  Plan p = ce_plan(Collective::AllGather, 2, false);
  p.links[0].channel = ChannelKind::Memory;
  EXPECT_THROW(lower_ce_plan(p), Error);
  p.links.clear();
  EXPECT_THROW(lower_ce_plan(p), Error);
  Plan f = ce_plan(Collective::AllReduce, 2, true);
  // A fused receive-reduce in place of a receive.
  Slot& s = f.ranks[0].tbs[1].slots[0];
  s.primitive = Primitive::RecvReduceCopy;
  s.src = {Buffer::Input, 0};
  try {
    lower_ce_plan(f);
    FAIL() << "a fused primitive was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused primitive"), std::string::npos) << e.what();
  }
}

TEST(CePlan, GeometryCoversTheBuffers) {
  Geometry g = make_geometry(Collective::AllReduce, 4, 1001, 4);
  EXPECT_EQ(g.chunk % 16, 0u);
  uint64_t sum = 0;
  for (int i = 0; i < 4; ++i) sum += g.length({Buffer::Input, i}, 1);
  EXPECT_EQ(sum, 4004u);
  EXPECT_EQ(g.length({Buffer::Scratch, 2}, 1), g.chunk);
  Geometry a = make_geometry(Collective::AllGather, 3, 7, 2);
  EXPECT_EQ(a.length({Buffer::Output, 2}, 1), 14u);
  EXPECT_EQ(a.offset({Buffer::Output, 2}), 28u);
}

// A peer's 2 MiB chunk at 0x7000'0000 in its process, mapped here at 0x9000'0000 when its
// first buffer (offset 0x1000) was opened; later buffers in that chunk (a freed buffer's
// place reused, or another live one) are reached through that mapping, the newest first.
TEST(CePlan, CoveringMappingReachesBuffersOfAChunkMappedBefore) {
  const uint64_t chunk = 2u << 20;
  std::vector<PeerMapping> maps;
  maps.push_back({1, 0x70001000, 4096, 0x90001000, 0x90000000, chunk});
  EXPECT_EQ(covering_mapping(maps, 1, 0x70001000, 4096), 0);        // the buffer itself
  EXPECT_EQ(covering_mapping(maps, 1, 0x70000000, 64), 0);          // below it, same chunk
  EXPECT_EQ(covering_mapping(maps, 1, 0x70000000 + chunk - 64, 64), 0);  // the chunk's last bytes
  EXPECT_EQ(covering_mapping(maps, 1, 0x70000000 + chunk - 64, 65), -1);  // runs past the chunk
  EXPECT_EQ(covering_mapping(maps, 1, 0x6FFFFFC0, 64), -1);         // before the chunk
  EXPECT_EQ(covering_mapping(maps, 0, 0x70001000, 64), -1);         // another peer's address
  EXPECT_EQ(covering_mapping({}, 1, 0x70001000, 64), -1);
  // The same peer range mapped again later (the peer's chunk freed and its addresses reused):
  // the newer mapping holds the peer's current memory.
  maps.push_back({1, 0x70000000, chunk, 0xA0000000, 0xA0000000, chunk});
  EXPECT_EQ(covering_mapping(maps, 1, 0x70002000, 4096), 1);
  // A mapping whose range the driver gave as the buffer only (not the chunk).
  maps.push_back({0, 0x50000000, 4096, 0xB0000000, 0xB0000000, 4096});
  EXPECT_EQ(covering_mapping(maps, 0, 0x50000000, 4096), 2);
  EXPECT_EQ(covering_mapping(maps, 0, 0x50001000, 16), -1);
}

// A peer freed an allocation this rank mapped and allocated again over its addresses: the
// new handle's allocation overlaps the old mapping's, which is stale; neighbours are not.
TEST(CePlan, StaleMappingsAreThoseThePeersNewAllocationOverlaps) {
  std::vector<PeerMapping> maps;
  maps.push_back({1, 0x1000, 0x1000, 0xA000, 0xA000, 0x1000});  // [0x1000, 0x2000) of rank 1
  maps.push_back({1, 0x2000, 0x1000, 0xB000, 0xB000, 0x1000});  // [0x2000, 0x3000) of rank 1
  maps.push_back({2, 0x1000, 0x1000, 0xC000, 0xC000, 0x1000});  // rank 2's, same addresses
  EXPECT_EQ(stale_mappings(maps, 1, 0x1000, 0x1000), std::vector<size_t>({0}));
  EXPECT_EQ(stale_mappings(maps, 1, 0x1800, 0x1000), std::vector<size_t>({0, 1}));
  EXPECT_EQ(stale_mappings(maps, 1, 0x3000, 0x1000), std::vector<size_t>{});  // adjacent only
  EXPECT_EQ(stale_mappings(maps, 1, 0x0, 0x1000), std::vector<size_t>{});
  EXPECT_EQ(stale_mappings(maps, 2, 0x0, 0x1001), std::vector<size_t>({2}));
}

TEST(CeSelection, OffByDefaultChosenByNameOrRow) {
  // The default table never names ce.
  for (Collective c : {Collective::AllGather, Collective::AllReduce})
    for (uint64_t bytes : {uint64_t(1) << 10, uint64_t(256) << 20})
      EXPECT_NE(default_selection_table().choose(c, bytes, 2).algorithm, kAlgorithm);
  setenv("WEFT_ALGO", "ce", 1);
  EXPECT_EQ(select_algorithm(Collective::AllGather, 256 << 20, 2, 32).algorithm, kAlgorithm);
  EXPECT_EQ(select_algorithm(Collective::AllReduce, 1 << 20, 4, 32).algorithm, kAlgorithm);
  EXPECT_NE(select_algorithm(Collective::ReduceScatter, 1 << 20, 4, 32).algorithm, kAlgorithm);
  EXPECT_NE(select_algorithm(Collective::AllGather, 1 << 20, kMaxRanks + 1, 32).algorithm, kAlgorithm);
  unsetenv("WEFT_ALGO");
  SelectionTable t = parse_selection_table(R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllGather", "AllReduce"], "bytes": [1048576, null], "algorithm": "ce", "protocol": "Simple", "instances": 1},
    {"collectives": ["AllGather", "AllReduce"], "algorithm": "ring", "protocol": "Simple", "instances": 2}]})",
                                           "ce.json");
  EXPECT_EQ(t.choose(Collective::AllGather, 1 << 20, 2).algorithm, kAlgorithm);
  EXPECT_EQ(t.choose(Collective::AllGather, 1 << 20, 2, false, true).algorithm, "ring");  // the fallback
  EXPECT_EQ(t.choose(Collective::AllReduce, 1 << 10, 2).algorithm, "ring");
  EXPECT_THROW(parse_selection_table(R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["ReduceScatter"], "algorithm": "ce", "protocol": "Simple", "instances": 1}]})",
                                     "bad.json"),
               Error);
}

// --- the programs run on host memory through proxies --------------------------------------

using Clock = std::chrono::steady_clock;

/// One rank's memory: input, output, scratch and signal words (inbound from each peer).
struct HostRank {
  std::vector<char> buf[3];
  char* base[3] = {nullptr, nullptr, nullptr};  // in-place AllReduce: base[0] is the output
  std::unique_ptr<uint64_t[]> sig;
  std::vector<uint64_t> waited;
  std::unique_ptr<proxy::Proxy> proxy;
  std::vector<device::PortChannelDeviceHandle> ch;  // by peer
  uint32_t local_id[3] = {0, 0, 0};
  std::vector<std::array<uint32_t, 3>> remote_id;   // by peer: its input (unused), output, scratch
};

void run_program(HostRank& me, const std::vector<Step>& prog, const Geometry& g, int dtype, int op) {
  const double kTimeout = 10;
  for (const Step& s : prog) {
    const size_t q = static_cast<size_t>(s.peer);
    switch (s.op) {
      case StepOp::Signal:
        me.proxy->fifo().push(device::ProxyTrigger::make(device::kTriggerSignal, me.ch[q].channel, 0, 0, 0, 0, 0),
                              kTimeout);
        break;
      case StepOp::Wait: {
        const uint64_t want = ++me.waited[q];
        auto t0 = Clock::now();
        while (std::atomic_ref<uint64_t>(me.sig[q]).load(std::memory_order_acquire) < want) {
          if (std::chrono::duration<double>(Clock::now() - t0).count() > kTimeout)
            fail(ErrorCode::Timeout, "wait for signal " + std::to_string(want) + " from rank " + std::to_string(q));
          std::this_thread::yield();
        }
        break;
      }
      case StepOp::Put: {
        // An empty chunk (a short AllReduce) still signals; its offsets may lie past the end.
        const uint64_t n = g.length(s.src, s.count);
        me.proxy->fifo().push(device::ProxyTrigger::make(device::kTriggerPut | device::kTriggerSignal, me.ch[q].channel,
                                                         me.remote_id[q][static_cast<size_t>(s.dst.buffer)], n ? g.offset(s.dst) : 0,
                                                         me.local_id[static_cast<size_t>(s.src.buffer)], n ? g.offset(s.src) : 0, n),
                              kTimeout);
        break;
      }
      case StepOp::Copy:
        std::memmove(me.base[static_cast<size_t>(s.dst.buffer)] + g.offset(s.dst),
                     me.base[static_cast<size_t>(s.src.buffer)] + g.offset(s.src), g.length(s.src, s.count));
        break;
      case StepOp::Reduce: {
        char* d = me.base[static_cast<size_t>(s.dst.buffer)] + g.offset(s.dst);
        host::combine(dtype, op, d, d, me.base[static_cast<size_t>(s.src.buffer)] + g.offset(s.src),
                      g.length(s.dst, s.count) / host::dtype_size(dtype));
        break;
      }
      case StepOp::Flush: {
        uint64_t i = me.proxy->fifo().push(device::ProxyTrigger::make(device::kTriggerFlush, me.ch[0].channel, 0, 0, 0, 0, 0),
                                           kTimeout);
        me.proxy->fifo().wait_tail(i, kTimeout);
        break;
      }
    }
  }
}

/// Runs `calls` calls of c among R ranks (threads), each through its own proxy, and checks
/// every rank's output against the host reference.
void run_on_host(Collective c, int R, bool in_place, int dtype, int op, size_t count, int calls,
                 uint64_t piece_bytes = kPieceBytes) {
  const size_t esz = host::dtype_size(dtype);
  const Geometry g = make_geometry(c, R, count, esz, piece_bytes);
  SCOPED_TRACE(std::string(to_string(c)) + " R=" + std::to_string(R) + (in_place ? " in place" : " out of place") +
               " " + host::dtype_name(dtype) + " " + host::op_name(op) + " count=" + std::to_string(count) +
               " pieces=" + std::to_string(g.pieces));
  const auto progs = lower_ce_plan(ce_plan(c, R, in_place, g.pieces));
  std::vector<HostRank> ranks(static_cast<size_t>(R));
  for (HostRank& m : ranks) {
    for (int b = 0; b < 3; ++b) m.buf[b].assign(std::max<uint64_t>(16, g.total[b]), 0);
    for (int b = 0; b < 3; ++b) m.base[b] = m.buf[b].data();
    if (in_place && c == Collective::AllReduce) m.base[0] = m.base[1];
    m.sig.reset(new uint64_t[static_cast<size_t>(R)]());
    m.waited.assign(static_cast<size_t>(R), 0);
  }
  for (int r = 0; r < R; ++r) {
    HostRank& m = ranks[static_cast<size_t>(r)];
    m.proxy = std::make_unique<proxy::Proxy>(proxy::ProxyOptions{"proxy of rank " + std::to_string(r), 16, 10});
    for (int b = 0; b < 3; ++b) m.local_id[b] = m.proxy->add_local_memory(m.base[b], m.buf[b].size());
    m.ch.resize(static_cast<size_t>(R));
    m.remote_id.resize(static_cast<size_t>(R));
    for (int q = 0; q < R; ++q) {
      if (q == r) continue;
      HostRank& peer = ranks[static_cast<size_t>(q)];
      auto conn = std::make_shared<proxy::HostEndpoint>("rank " + std::to_string(q));
      for (int b = 0; b < 3; ++b)
        m.remote_id[static_cast<size_t>(q)][static_cast<size_t>(b)] = m.proxy->add_remote_memory(
            conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(peer.base[b]), peer.buf[b].size(), nullptr});
      const uint32_t sig = m.proxy->add_remote_memory(
          conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(peer.sig.get()), static_cast<uint64_t>(R) * 8, nullptr});
      m.ch[static_cast<size_t>(q)] = m.proxy->make_port_channel(proxy::PortChannelSpec{
          conn, m.local_id[0], m.remote_id[static_cast<size_t>(q)][1], sig, static_cast<uint64_t>(r) * 8,
          &m.sig[static_cast<size_t>(q)], &m.waited[static_cast<size_t>(q)]});
    }
    m.proxy->start();
  }
  const size_t ns = host::send_elems(c, count, R), nr = host::recv_elems(c, count, R);
  for (int call = 0; call < calls; ++call) {
    std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) {
      HostRank& m = ranks[static_cast<size_t>(r)];
      auto& s = sends[static_cast<size_t>(r)];
      s.resize(ns * esz);
      host::fill_random(dtype, op, s.data(), ns, static_cast<uint64_t>(call * 97 + r + 1));
      std::memset(m.buf[1].data(), 0xA5, m.buf[1].size());  // poison
      std::memset(m.buf[2].data(), 0x5A, m.buf[2].size());
      if (!in_place) std::memcpy(m.buf[0].data(), s.data(), s.size());
      else if (c == Collective::AllGather) std::memcpy(m.buf[1].data() + static_cast<size_t>(r) * count * esz, s.data(), s.size());
      else std::memcpy(m.buf[1].data(), s.data(), s.size());
    }
    std::vector<std::string> errors(static_cast<size_t>(R));
    std::vector<std::thread> threads;
    for (int r = 0; r < R; ++r)
      threads.emplace_back([&, r] {
        try {
          run_program(ranks[static_cast<size_t>(r)], progs[static_cast<size_t>(r)], g, dtype, op == weftAvg ? weftSum : op);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < R; ++r) {
      ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r << " call " << call;
      HostRank& m = ranks[static_cast<size_t>(r)];
      if (op == weftAvg) host::divide(dtype, m.buf[1].data(), count, R);
      std::vector<uint8_t> want = host::reference_for_rank(c, dtype, op, 0, count, r, sends, {});
      ASSERT_EQ(want.size(), nr * esz);
      EXPECT_EQ(std::memcmp(want.data(), m.buf[1].data(), want.size()), 0) << "rank " << r << " call " << call;
      for (int q = 0; q < R; ++q)
        if (q != r) {
          EXPECT_FALSE(m.proxy->error()) << *m.proxy->error();
        }
    }
  }
  for (HostRank& m : ranks) m.proxy->stop();
}

TEST(CeOnHost, AllGatherEveryShape) {
  for (int R : {2, 3, 4})
    for (bool in_place : {false, true})
      for (int dtype : {weftInt8, weftFloat16, weftFloat32, weftFloat64})
        for (size_t count : {size_t(1), size_t(7), size_t(1000)}) run_on_host(Collective::AllGather, R, in_place, dtype, 0, count, 3);
}

TEST(CeOnHost, AllReduceEveryOp) {
  for (int R : {2, 3, 4})
    for (bool in_place : {false, true})
      for (int dtype : {weftInt32, weftBfloat16, weftFloat32, weftUint64})
        for (int op = 0; op < weftNumOps; ++op)
          for (size_t count : {size_t(1), size_t(13), size_t(4099)})
            run_on_host(Collective::AllReduce, R, in_place, dtype, op, count, 3);
}

TEST(CeOnHost, AllReduceInPieces) {
  // Small pieces so that small buffers take 2 to 8 of them (uneven ends, empty pieces).
  for (int R : {2, 3, 4})
    for (bool in_place : {false, true})
      for (int op : {weftSum, weftMax, weftAvg})
        for (size_t count : {size_t(5), size_t(1000), size_t(4099), size_t(20000)})
          run_on_host(Collective::AllReduce, R, in_place, weftFloat32, op, count, 3, 1024);
}

}  // namespace
}  // namespace weft::ce
