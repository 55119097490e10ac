// Test algorithms and topologies built in C++, so the compiler's tests do not depend on the
// front-ends. Each algorithm follows ResCCLang's model (in place, one chunk per rank, transfers
// between equal chunk ids), as the built-ins under algorithms/ do.
#pragma once

#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"

namespace weft::test {

/// The paper's A100 cluster: `nodes` x `gpus` GPUs, one 200 Gb/s NIC per two GPUs.
inline Topology a100(int nodes, int gpus) {
  Topology t;
  t.name = "a100-" + std::to_string(nodes) + "x" + std::to_string(gpus);
  t.gpu = "a100";
  t.nodes = nodes;
  t.gpus_per_node = gpus;
  t.nics_per_node = nodes > 1 ? std::max(1, gpus / 2) : 0;
  if (nodes > 1)
    for (int g = 0; g < gpus; ++g) t.nic_of_gpu.push_back(g / 2);
  t.nodes_per_rack = 2;
  t.nvlink_bandwidth_GBps = 300;
  t.nvlink_latency_us = 1;
  t.nic_bandwidth_GBps = 25;
  t.nic_latency_us = 5;
  t.tb_copy_GBps = 20;
  t.tb_net_GBps = 10;
  t.hbm_bandwidth_GBps = 2000;
  t.primitive_overhead_us = 1;
  return t;
}

/// Python's %, which ResCCLang uses: never negative.
inline int mod(int x, int m) { return ((x % m) + m) % m; }

inline Algorithm resccl(const std::string& name, Collective c, int ranks) {
  Algorithm a;
  a.name = name;
  a.collective = c;
  a.ranks = ranks;
  a.in_place = true;
  a.input_chunks = c == Collective::AllGather ? 1 : ranks;
  a.output_chunks = c == Collective::ReduceScatter ? 1 : ranks;
  return a;
}

/// ResCCLang's transfer(src, dst, step, chunk, recv|rrc).
inline void transfer(Algorithm& a, int src, int dst, int step, int chunk, bool reduce) {
  Buffer b = a.collective == Collective::ReduceScatter ? Buffer::Input : Buffer::Output;
  a.transfers.push_back({src, b, chunk, dst, b, chunk, 1, reduce ? TransferOp::Reduce : TransferOp::Copy, step});
}

/// Paper 001 Figure 16: HM AllReduce on nodes x gpus ranks.
inline Algorithm hm_allreduce(int nodes, int gpus) {
  int R = nodes * gpus;
  Algorithm a = resccl("hm_allreduce", Collective::AllReduce, R);
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < gpus; ++r)
      for (int b = 0; b < nodes; ++b)
        for (int o = 0; o < gpus - 1; ++o) {
          int src = gpus * n + r, dst = (r + o + 1) % gpus + gpus * n;
          transfer(a, src, dst, b * (gpus - 1) + o, (dst + b * gpus) % R, true);
        }
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < gpus; ++r)
      for (int b = 0; b < nodes - 1; ++b) {
        int src = gpus * n + r, dst = (src + gpus) % R;
        transfer(a, src, dst, nodes * (gpus - 1) + b, mod(src - b * gpus, R), true);
      }
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < gpus; ++r)
      for (int b = 0; b < nodes - 1; ++b) {
        int src = gpus * n + r, dst = (src + gpus) % R;
        transfer(a, src, dst, nodes * (gpus - 1) + nodes - 1 + b, mod(src - (b + nodes - 1) * gpus, R), false);
      }
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < gpus; ++r)
      for (int b = 0; b < nodes; ++b)
        for (int o = 0; o < gpus - 1; ++o) {
          int src = gpus * n + r, dst = (r + o + 1) % gpus + gpus * n;
          transfer(a, src, dst, nodes * (gpus - 1) + 2 * nodes - 2 + b, (src + b * gpus) % R, false);
        }
  return a;
}

/// Hierarchical-mesh AllGather: each GPU sends its chunk to its node and its ring peers
/// across nodes, then forwards what it received from other nodes inside its node.
inline Algorithm hm_allgather(int nodes, int gpus) {
  int R = nodes * gpus;
  Algorithm a = resccl("hm_allgather", Collective::AllGather, R);
  a.input_chunks = 1;
  a.output_chunks = R;
  for (int src = 0; src < R; ++src) {
    int n = src / gpus, r = src % gpus;
    for (int o = 1; o < gpus; ++o) transfer(a, src, n * gpus + (r + o) % gpus, 0, src, false);
    for (int b = 0; b < nodes - 1; ++b) {  // ring across nodes: forward the chunk of node n - b
      int from = src, to = (src + gpus) % R;
      transfer(a, from, to, 1 + b, mod(src - b * gpus, R), false);
    }
  }
  for (int src = 0; src < R; ++src) {
    int n = src / gpus, r = src % gpus;
    for (int k = 1; k < nodes; ++k) {
      int chunk = mod(src - k * gpus, R);
      for (int o = 1; o < gpus; ++o) transfer(a, src, n * gpus + (r + o) % gpus, nodes + k, chunk, false);
    }
  }
  return a;
}

inline Algorithm ring_allgather(int R) {
  Algorithm a = resccl("ring_allgather", Collective::AllGather, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) transfer(a, r, (r + 1) % R, s, (r + R - s) % R, false);
  return a;
}

inline Algorithm ring_reducescatter(int R) {
  Algorithm a = resccl("ring_reducescatter", Collective::ReduceScatter, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) transfer(a, r, (r + 1) % R, s, (r + R - s - 1) % R, true);
  return a;
}

inline Algorithm ring_allreduce(int R) {
  Algorithm a = resccl("ring_allreduce", Collective::AllReduce, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) transfer(a, r, (r + 1) % R, s, (r + R - s - 1) % R, true);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) transfer(a, r, (r + 1) % R, R - 1 + s, (r + R - s) % R, false);
  return a;
}

inline Algorithm allpairs_allreduce(int R) {
  Algorithm a = resccl("allpairs_allreduce", Collective::AllReduce, R);
  for (int r = 0; r < R; ++r)
    for (int o = 1; o < R; ++o) transfer(a, r, (r + o) % R, o - 1, (r + o) % R, true);
  for (int r = 0; r < R; ++r)
    for (int o = 1; o < R; ++o) transfer(a, r, (r + o) % R, R - 1, r, false);
  return a;
}

/// Direct AllToAll, out of place: rank r's input chunk d goes to rank d's output chunk r.
inline Algorithm alltoall(int R) {
  Algorithm a;
  a.name = "alltoall";
  a.collective = Collective::AllToAll;
  a.ranks = R;
  a.input_chunks = a.output_chunks = R;
  a.in_place = false;
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < R; ++o) {
      int d = (r + o) % R;
      a.transfers.push_back({r, Buffer::Input, d, d, Buffer::Output, r, 1, TransferOp::Copy, 0});
    }
  return a;
}

/// Chain broadcast from rank 0 with two chunks per rank moved as one aggregated pair.
inline Algorithm chain_broadcast(int R) {
  Algorithm a;
  a.name = "chain_broadcast";
  a.collective = Collective::Broadcast;
  a.ranks = R;
  a.input_chunks = a.output_chunks = 4;
  a.in_place = true;
  for (int r = 0; r + 1 < R; ++r)
    for (int c = 0; c < 4; ++c) a.transfers.push_back({r, Buffer::Output, c, r + 1, Buffer::Output, c, 1, TransferOp::Copy, r});
  return a;
}

struct Case {
  Algorithm algo;
  Topology topo;
};

/// The algorithms every compiler test runs, at several sizes.
inline std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (auto [n, g] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{3, 2}}) {
    v.push_back({hm_allreduce(n, g), a100(n, g)});
    v.push_back({hm_allgather(n, g), a100(n, g)});
  }
  for (int r : {2, 4, 8}) {
    v.push_back({ring_allgather(r), a100(1, r)});
    v.push_back({ring_reducescatter(r), a100(1, r)});
    v.push_back({ring_allreduce(r), a100(1, r)});
    v.push_back({allpairs_allreduce(r), a100(1, r)});
    v.push_back({alltoall(r), a100(1, r)});
  }
  v.push_back({ring_allreduce(8), a100(2, 4)});
  v.push_back({chain_broadcast(4), a100(2, 2)});
  return v;
}

}  // namespace weft::test
