// Synthetic plans for the simulator's scale benchmark: HM AllReduce (paper 001 Fig. 16)
// written out as transfers and lowered naively (one thread block per connection end, slots
// in step order, each waiting on the last write of its chunk on its rank). It stands in for
// the compiler's plan so the engine's speed can be measured on its own.
#pragma once

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "ir/plan.hpp"

namespace weft::bench {

struct SynTransfer {
  int src, dst, step, chunk;
  bool reduce;
};

/// HM AllReduce on `nodes` x `gpus` ranks, one chunk per rank.
inline std::vector<SynTransfer> hm_allreduce(int nodes, int gpus) {
  const int N = nodes, G = gpus, C = N * G;
  std::vector<SynTransfer> t;
  for (int n = 0; n < N; ++n)
    for (int r = 0; r < G; ++r)
      for (int b = 0; b < N; ++b)
        for (int o = 0; o < G - 1; ++o) {
          int src = G * n + r, dst = (r + o + 1) % G + G * n;
          t.push_back({src, dst, b * (G - 1) + o, (dst + b * G) % C, true});
        }
  const int base = N * (G - 1);
  for (int n = 0; n < N; ++n)
    for (int r = 0; r < G; ++r)
      for (int b = 0; b < N - 1; ++b) {
        int src = G * n + r, dst = (src + G) % C;
        t.push_back({src, dst, base + b, (src + C - b * G) % C, true});
        t.push_back({src, dst, base + N - 1 + b, (src + C - (b + N - 1) * G) % C, false});
      }
  const int base2 = base + 2 * N - 2;
  for (int n = 0; n < N; ++n)
    for (int r = 0; r < G; ++r)
      for (int b = 0; b < N; ++b)
        for (int o = 0; o < G - 1; ++o) {
          int src = G * n + r, dst = (r + o + 1) % G + G * n;
          t.push_back({src, dst, base2 + b * (G - 1) + o, (src + b * G) % C, false});
        }
  return t;
}

/// Connection-based lowering under task-level execution (see the header comment).
inline Plan lower_naive(const std::vector<SynTransfer>& ts, int ranks, int chunks, Collective coll) {
  Plan p;
  p.algorithm = "synthetic";
  p.collective = coll;
  p.num_ranks = ranks;
  p.input_chunks = p.output_chunks = chunks;
  p.scheduler = "step";
  p.allocator = "conn";
  p.ranks.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) p.ranks[static_cast<size_t>(r)].rank = r;
  std::vector<size_t> order(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ts[a].step < ts[b].step; });
  // (rank, peer, dir) -> tb; (rank, chunk) -> last writer (tb, slot).
  std::vector<std::map<std::pair<int, int>, int>> tb_of(static_cast<size_t>(ranks));
  std::vector<std::map<int, SlotDep>> writer(static_cast<size_t>(ranks));
  auto tb_for = [&](int rank, int peer, int dir) {
    auto& m = tb_of[static_cast<size_t>(rank)];
    auto [it, fresh] = m.try_emplace({peer, dir}, static_cast<int>(p.ranks[static_cast<size_t>(rank)].tbs.size()));
    if (fresh) p.ranks[static_cast<size_t>(rank)].tbs.emplace_back();
    return it->second;
  };
  for (size_t i : order) {
    const SynTransfer& t = ts[i];
    Slot s;
    s.primitive = Primitive::Send;
    s.send_peer = t.dst;
    auto w = writer[static_cast<size_t>(t.src)].find(t.chunk);
    if (w != writer[static_cast<size_t>(t.src)].end()) s.deps.push_back(w->second);
    int stb = tb_for(t.src, t.dst, 0);
    p.ranks[static_cast<size_t>(t.src)].tbs[static_cast<size_t>(stb)].slots.push_back(s);
    Slot d;
    d.primitive = t.reduce ? Primitive::RecvReduceCopy : Primitive::Recv;
    d.recv_peer = t.src;
    auto w2 = writer[static_cast<size_t>(t.dst)].find(t.chunk);
    if (w2 != writer[static_cast<size_t>(t.dst)].end()) d.deps.push_back(w2->second);
    int dtb = tb_for(t.dst, t.src, 1);
    auto& dslots = p.ranks[static_cast<size_t>(t.dst)].tbs[static_cast<size_t>(dtb)].slots;
    dslots.push_back(d);
    writer[static_cast<size_t>(t.dst)][t.chunk] = SlotDep{dtb, static_cast<int>(dslots.size()) - 1};
  }
  return p;
}

}  // namespace weft::bench
