#include "builders.hpp"

namespace weft::test {

namespace {

/// Python's modulo (the result has the sign of the divisor), as ResCCLang computes it.
int mod(int a, int b) { return ((a % b) + b) % b; }

/// An algorithm on ResCCLang's unified data buffer of `chunks` chunks per rank (in place),
/// shaped as the parser shapes it (see docs/resccllang.md).
Algorithm data_buffer(const char* name, Collective c, int ranks, int chunks, int scratch = 0) {
  Algorithm a;
  a.name = name;
  a.collective = c;
  a.ranks = ranks;
  a.in_place = true;
  a.scratch_chunks = scratch;
  a.input_chunks = chunks;
  a.output_chunks = chunks;
  if (c == Collective::AllGather) a.input_chunks = chunks / ranks;
  if (c == Collective::ReduceScatter) a.output_chunks = chunks / ranks;
  a.gpus_per_node = ranks;
  return a;
}

/// The buffer that ResCCLang's `data` names for this collective.
Buffer data(const Algorithm& a) { return a.collective == Collective::ReduceScatter ? Buffer::Input : Buffer::Output; }

void send(Algorithm& a, int src, int dst, int step, int chunk, TransferOp op) {
  Buffer b = data(a);
  a.transfers.push_back({src, b, chunk, dst, b, chunk, 1, op, step});
}

void move(Algorithm& a, int src, Buffer sb, int si, int dst, Buffer db, int di, int step,
          TransferOp op = TransferOp::Copy, int count = 1) {
  a.transfers.push_back({src, sb, si, dst, db, di, count, op, step});
}

constexpr TransferOp recv = TransferOp::Copy;
constexpr TransferOp rrc = TransferOp::Reduce;

}  // namespace

Algorithm ring_allgather(int R) {
  Algorithm a = data_buffer("ring_allgather", Collective::AllGather, R, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) send(a, r, (r + 1) % R, s, mod(r - s, R), recv);
  return a;
}

Algorithm ring_reducescatter(int R) {
  Algorithm a = data_buffer("ring_reducescatter", Collective::ReduceScatter, R, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) send(a, r, (r + 1) % R, s, mod(r - s - 1, R), rrc);
  return a;
}

Algorithm ring_allreduce(int R) {
  Algorithm a = data_buffer("ring_allreduce", Collective::AllReduce, R, R);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) send(a, r, (r + 1) % R, s, mod(r - s - 1, R), rrc);
  for (int s = 0; s < R - 1; ++s)
    for (int r = 0; r < R; ++r) send(a, r, (r + 1) % R, R - 1 + s, mod(r - s, R), recv);
  return a;
}

Algorithm hm_allgather(int N, int G) {
  const int R = N * G;
  Algorithm a = data_buffer("hm_allgather", Collective::AllGather, R, R);
  a.gpus_per_node = G;
  // Intra-node mesh: at step j, rank r hands its local peers the chunk that came from j nodes back.
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < N; ++j)
      for (int o = 0; o < G - 1; ++o) send(a, r, (r / G) * G + (r % G + o + 1) % G, j, mod(r - j * G, R), recv);
  // Inter-node ring among GPUs of one local index.
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < N - 1; ++j) send(a, r, (r + G) % R, j, mod(r - j * G, R), recv);
  return a;
}

Algorithm hm_allreduce(int N, int G) {
  const int R = N * G;
  Algorithm a = data_buffer("hm_allreduce", Collective::AllReduce, R, R);
  a.gpus_per_node = G;
  // 1. Intra-node ReduceScatter: at step o, rank r reduces into its local peer p every chunk of p's class.
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < G - 1; ++o) {
      int p = (r / G) * G + (r % G + o + 1) % G;
      for (int x = 0; x < N; ++x) send(a, r, p, o, p % G + x * G, rrc);
    }
  // 2. Inter-node ring ReduceScatter over the chunks of the rank's class.
  const int rs = G - 1;
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < N - 1; ++b) send(a, r, (r + G) % R, rs + b, mod(r - b * G, R), rrc);
  // 3. Inter-node ring AllGather, and 4. the intra-node mesh AllGather pipelined behind it.
  const int ag = rs + N - 1;
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < N - 1; ++b) send(a, r, (r + G) % R, ag + b, mod(r + G - b * G, R), recv);
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < N; ++b)
      for (int o = 0; o < G - 1; ++o)
        send(a, r, (r / G) * G + (r % G + o + 1) % G, ag + b, mod(r + G - b * G, R), recv);
  return a;
}

Algorithm allpairs_allreduce(int R) {
  Algorithm a = data_buffer("allpairs_allreduce", Collective::AllReduce, R, R, R);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < R; ++q)
      if (q != r) move(a, r, Buffer::Output, q, q, Buffer::Scratch, r, 0);
  for (int q = 0; q < R; ++q)
    for (int j = 1; j < R; ++j) move(a, q, Buffer::Scratch, (q + j) % R, q, Buffer::Output, q, j, rrc);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < R; ++q)
      if (q != r) send(a, r, q, R, r, recv);
  return a;
}

Algorithm allpairs_allgather(int R) {
  Algorithm a = data_buffer("allpairs_allgather", Collective::AllGather, R, R);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < R; ++q)
      if (q != r) send(a, r, q, 0, r, recv);
  return a;
}

Algorithm allpairs_reducescatter(int R) {
  Algorithm a = data_buffer("allpairs_reducescatter", Collective::ReduceScatter, R, R, R);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < R; ++q)
      if (q != r) move(a, r, Buffer::Input, q, q, Buffer::Scratch, r, 0);
  for (int q = 0; q < R; ++q)
    for (int j = 1; j < R; ++j) move(a, q, Buffer::Scratch, (q + j) % R, q, Buffer::Input, q, j, rrc);
  return a;
}

Algorithm alltoall_direct(int R) {
  Algorithm a = data_buffer("alltoall_direct", Collective::AllToAll, R, R);
  a.in_place = false;
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < R; ++q) move(a, r, Buffer::Input, q, q, Buffer::Output, r, 0);
  return a;
}

Algorithm alltoall_twostep(int N, int G) {
  const int R = N * G;
  Algorithm a = data_buffer("alltoall_twostep", Collective::AllToAll, R, R, R);
  a.in_place = false;
  a.gpus_per_node = G;
  for (int r = 0; r < R; ++r) {
    int n1 = r / G, g1 = r % G;
    for (int g2 = 0; g2 < G; ++g2) {
      int p = n1 * G + g2;
      move(a, r, Buffer::Input, n1 * G + g2, p, Buffer::Output, r, 0);
      for (int n2 = 0; n2 < N; ++n2)
        if (n2 != n1) move(a, r, Buffer::Input, n2 * G + g2, p, Buffer::Scratch, n2 * G + g1, 0);
    }
  }
  for (int gw = 0; gw < R; ++gw) {
    int n1 = gw / G, g2 = gw % G;
    for (int n2 = 0; n2 < N; ++n2)
      if (n2 != n1) move(a, gw, Buffer::Scratch, n2 * G, n2 * G + g2, Buffer::Output, n1 * G, 1, recv, G);
  }
  return a;
}

Algorithm alltonext(int N, int G) {
  const int R = N * G;
  Algorithm a = data_buffer("alltonext", Collective::Custom, R, G, 2);
  a.in_place = false;
  a.gpus_per_node = G;
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < G - 1; ++l) move(a, n * G + l, Buffer::Input, 0, n * G + l + 1, Buffer::Output, 0, 0, recv, G);
  for (int n = 0; n + 1 < N; ++n) {
    int s = n * G + G - 1, d = (n + 1) * G;
    for (int c = 0; c < G - 1; ++c) move(a, s, Buffer::Input, c, n * G + c, Buffer::Scratch, 0, 0);
    if (G == 1) {
      move(a, s, Buffer::Input, 0, d, Buffer::Output, 0, 1);
      continue;
    }
    move(a, n * G, Buffer::Scratch, 0, d, Buffer::Output, 0, 1);
    for (int c = 1; c < G - 1; ++c) move(a, n * G + c, Buffer::Scratch, 0, d + c, Buffer::Scratch, 1, 1);
    move(a, s, Buffer::Input, G - 1, d + G - 1, Buffer::Scratch, 1, 1);
    for (int c = 1; c < G; ++c) move(a, d + c, Buffer::Scratch, 1, d, Buffer::Output, c, 2);
  }
  for (int r = 0; r + 1 < R; ++r)
    for (int c = 0; c < G; ++c) a.custom_postcondition.push_back({{r + 1, Buffer::Output, c}, {{r, c}}});
  return a;
}

Algorithm chain_broadcast(int R, int root) {
  Algorithm a = data_buffer("chain_broadcast", Collective::Broadcast, R, R);
  a.root = root;
  for (int h = 0; h < R - 1; ++h)
    for (int c = 0; c < R; ++c) send(a, (root + h) % R, (root + h + 1) % R, c + h, c, recv);
  return a;
}

Algorithm chain_reduce(int R, int root) {
  Algorithm a = data_buffer("chain_reduce", Collective::Reduce, R, R);
  a.root = root;
  for (int h = 0; h < R - 1; ++h)
    for (int c = 0; c < R; ++c) send(a, (root + 1 + h) % R, (root + 2 + h) % R, c + h, c, rrc);
  return a;
}

}  // namespace weft::test
