#include "lang/chunk_dsl_algorithms.hpp"

#include <string>
#include <vector>

#include "lang/chunk_dsl.hpp"
#include "util/error.hpp"

namespace weft::dsl {

namespace {

constexpr Buffer kData = Buffer::Output;  // ResCCLang's data buffer for AllReduce (in place)

void need_nodes(const char* name, int32_t ranks, int32_t g) {
  if (g < 1 || ranks < 1 || ranks % g != 0)
    fail(ErrorCode::InvalidArgument, std::string(name) + ": ranks (" + std::to_string(ranks) +
                                         ") must be a positive multiple of gpus_per_node (" + std::to_string(g) + ")");
}

}  // namespace

Algorithm ring_allreduce(int32_t ranks) {
  const int32_t n = ranks;
  Program p({.name = "ring_allreduce", .collective = Collective::AllReduce, .ranks = n, .input_chunks = n,
             .gpus_per_node = n});
  // ReduceScatter: chunk c starts on rank c+1 and picks up every rank's share on its way to
  // rank c; `partial[c]` is the reference to the running sum.
  std::vector<ChunkRef> partial;
  for (int32_t c = 0; c < n; ++c) partial.push_back(p.chunk((c + 1) % n, kData, c));
  for (int32_t step = 0; step + 1 < n; ++step)
    for (int32_t r = 0; r < n; ++r) {
      int32_t c = (r - step - 1 + n) % n;
      partial[static_cast<size_t>(c)] = p.chunk((r + 1) % n, kData, c).reduce(partial[static_cast<size_t>(c)]);
    }
  // AllGather: the reduced chunk travels on around the ring.
  for (int32_t step = 0; step + 1 < n; ++step)
    for (int32_t r = 0; r < n; ++r) {
      int32_t c = (r - step + n) % n;
      partial[static_cast<size_t>(c)] = partial[static_cast<size_t>(c)].copy((r + 1) % n, kData, c);
    }
  return p.algorithm();
}

Algorithm allpairs_allreduce(int32_t ranks) {
  const int32_t n = ranks;
  Program p({.name = "allpairs_allreduce", .collective = Collective::AllReduce, .ranks = n, .input_chunks = n,
             .scratch_chunks = n, .gpus_per_node = n});
  // Rank r's share of chunk q lands in scratch chunk r of rank q.
  for (int32_t r = 0; r < n; ++r)
    for (int32_t d = 1; d < n; ++d) {
      int32_t q = (r + d) % n;
      p.chunk(r, kData, q).copy(q, Buffer::Scratch, r);
    }
  // Rank q adds the shares into its chunk q, one local reduction at a time.
  std::vector<ChunkRef> sum;
  for (int32_t q = 0; q < n; ++q) {
    ChunkRef acc = p.chunk(q, kData, q);
    for (int32_t j = 1; j < n; ++j) acc = acc.reduce(p.chunk(q, Buffer::Scratch, (q + j) % n));
    sum.push_back(acc);
  }
  // Every rank sends its reduced chunk straight to every other rank.
  for (int32_t r = 0; r < n; ++r)
    for (int32_t d = 1; d < n; ++d) sum[static_cast<size_t>(r)].copy((r + d) % n, kData, r);
  return p.algorithm();
}

Algorithm hierarchical_allreduce(int32_t ranks, int32_t gpus_per_node) {
  need_nodes("hierarchical_allreduce", ranks, gpus_per_node);
  const int32_t n = ranks, G = gpus_per_node, nodes = n / G;
  Program p({.name = "hm_allreduce", .collective = Collective::AllReduce, .ranks = n, .input_chunks = n,
             .gpus_per_node = G});
  // The program runs in order, so each phase walks its steps outermost (ResCCLang's file
  // numbers the steps instead and may list a rank's transfers of all steps together).
  // 1. Intra-node ReduceScatter over the mesh: local gpu i owns chunks i + G*x; at step
  //    `offset` each rank adds its share of those chunks into peer i+offset+1.
  for (int32_t offset = 0; offset + 1 < G; ++offset)
    for (int32_t r = 0; r < n; ++r) {
      int32_t peer = (r / G) * G + (r % G + offset + 1) % G;
      for (int32_t x = 0; x < nodes; ++x) {
        int32_t c = peer % G + x * G;
        p.chunk(peer, kData, c).reduce(p.chunk(r, kData, c));
      }
    }
  // 2. Inter-node ReduceScatter on the ring of equal local index (r -> r+G): afterwards
  //    rank r holds chunk r+G reduced over all ranks.
  for (int32_t b = 0; b + 1 < nodes; ++b)
    for (int32_t r = 0; r < n; ++r) {
      int32_t c = (r - b * G + n) % n;
      p.chunk((r + G) % n, kData, c).reduce(p.chunk(r, kData, c));
    }
  // 3. and 4., pipelined: at each step a rank passes the reduced chunk it holds newest on
  //    around the inter-node ring and hands it to its local peers.
  for (int32_t b = 0; b < nodes; ++b) {
    if (b + 1 < nodes)
      for (int32_t r = 0; r < n; ++r) {
        int32_t c = (r + G - b * G + n) % n;
        p.chunk(r, kData, c).copy((r + G) % n, kData, c);
      }
    for (int32_t r = 0; r < n; ++r) {
      int32_t c = (r + G - b * G + n) % n;
      ChunkRef mine = p.chunk(r, kData, c);
      for (int32_t offset = 0; offset + 1 < G; ++offset) mine.copy((r / G) * G + (r % G + offset + 1) % G, kData, c);
    }
  }
  return p.algorithm();
}

Algorithm alltoall_twostep(int32_t ranks, int32_t gpus_per_node) {
  need_nodes("alltoall_twostep", ranks, gpus_per_node);
  const int32_t n = ranks, G = gpus_per_node, nodes = n / G;
  Program p({.name = "alltoall_twostep", .collective = Collective::AllToAll, .ranks = n, .input_chunks = n,
             .in_place = false, .scratch_chunks = n, .gpus_per_node = G});
  // Step 0, inside each node: rank (n1, g1) sends the chunk for (n2, g2) to its gateway
  // (n1, g2): into the output when n2 is this node, else into scratch chunk n2*G + g1.
  for (int32_t r = 0; r < n; ++r) {
    int32_t n1 = r / G, g1 = r % G;
    for (int32_t g2 = 0; g2 < G; ++g2) {
      int32_t gateway = n1 * G + g2;
      p.chunk(r, Buffer::Input, n1 * G + g2).copy(gateway, Buffer::Output, r);
      for (int32_t d = 1; d < nodes; ++d) {
        int32_t n2 = (n1 + d) % nodes;
        p.chunk(r, Buffer::Input, n2 * G + g2).copy(gateway, Buffer::Scratch, n2 * G + g1);
      }
    }
  }
  // Step 1, across nodes: each gateway sends the G chunks gathered for (n2, g2) as one.
  for (int32_t gateway = 0; gateway < n; ++gateway) {
    int32_t n1 = gateway / G, g2 = gateway % G;
    for (int32_t d = 1; d < nodes; ++d) {
      int32_t n2 = (n1 + d) % nodes;
      p.chunk(gateway, Buffer::Scratch, n2 * G, G).copy(n2 * G + g2, Buffer::Output, n1 * G);
    }
  }
  return p.algorithm();
}

std::vector<std::string> builtin_names() {
  return {"allpairs_allreduce", "alltoall_twostep", "hm_allreduce", "ring_allreduce"};
}

Algorithm builtin(const std::string& name, const std::map<std::string, std::string>& params) {
  auto param = [&](const char* key, int32_t fallback) -> int32_t {
    auto it = params.find(key);
    if (it == params.end()) {
      if (fallback > 0) return fallback;
      fail(ErrorCode::InvalidArgument, "chunk-DSL algorithm '" + name + "' needs parameter " + key);
    }
    const std::string& v = it->second;
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos || std::stol(v) < 1)
      fail(ErrorCode::InvalidArgument, "chunk-DSL algorithm '" + name + "': parameter " + key + "=" + v +
                                           " is not a positive integer");
    return static_cast<int32_t>(std::stol(v));
  };
  for (const auto& [k, v] : params)
    if (k != "nRanks" && k != "GPUPerNode" && k != "NICPerNode")
      fail(ErrorCode::InvalidArgument, "chunk-DSL algorithm '" + name + "' takes no parameter '" + k +
                                           "' (known: nRanks, GPUPerNode)");
  const int32_t ranks = param("nRanks", 0);
  if (name == "ring_allreduce") return ring_allreduce(ranks);
  if (name == "allpairs_allreduce") return allpairs_allreduce(ranks);
  if (name == "hm_allreduce") return hierarchical_allreduce(ranks, param("GPUPerNode", ranks));
  if (name == "alltoall_twostep") return alltoall_twostep(ranks, param("GPUPerNode", ranks));
  std::string known;
  for (const std::string& n : builtin_names()) known += (known.empty() ? "" : ", ") + n;
  fail(ErrorCode::InvalidArgument, "'" + name + "' is no chunk-DSL algorithm (known: " + known + ")");
}

}  // namespace weft::dsl
