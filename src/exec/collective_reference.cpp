#include "exec/collective_reference.hpp"

#include <cstring>
#include <algorithm>
#include <thread>
#include <type_traits>

#include "exec/host_reduce.hpp"
#include "ir/call_buffers.hpp"

namespace weft::host {

size_t send_elems(Collective c, size_t count, int R) { return count * static_cast<size_t>(send_counts(c, R)); }

size_t recv_elems(Collective c, size_t count, int R) { return count * static_cast<size_t>(recv_counts(c, R)); }

std::vector<std::vector<uint8_t>> reference(Collective c, int dtype, int op, int root, size_t count,
                                            const std::vector<std::vector<uint8_t>>& sends,
                                            const std::vector<std::vector<uint8_t>>& untouched) {
  const int R = static_cast<int>(sends.size());
  const size_t esz = dtype_size(dtype);
  const size_t bytes = count * esz;
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(R));
  auto reduce_block = [&](size_t offset_bytes) {
    std::vector<uint8_t> acc(sends[0].begin() + static_cast<std::ptrdiff_t>(offset_bytes),
                             sends[0].begin() + static_cast<std::ptrdiff_t>(offset_bytes + bytes));
    for (int q = 1; q < R; ++q) combine(dtype, op, acc.data(), acc.data(), sends[static_cast<size_t>(q)].data() + offset_bytes, count);
    if (divides(op)) divide(dtype, acc.data(), count, R);
    return acc;
  };
  for (int r = 0; r < R; ++r) {
    auto& o = out[static_cast<size_t>(r)];
    switch (c) {
      case Collective::AllReduce: o = reduce_block(0); break;
      case Collective::Reduce: o = r == root ? reduce_block(0) : untouched[static_cast<size_t>(r)]; break;
      case Collective::Broadcast: o = sends[static_cast<size_t>(root)]; break;
      case Collective::ReduceScatter: o = reduce_block(static_cast<size_t>(r) * bytes); break;
      case Collective::AllGather:
        o.resize(bytes * static_cast<size_t>(R));
        for (int q = 0; q < R; ++q)
          if (bytes) std::memcpy(o.data() + static_cast<size_t>(q) * bytes, sends[static_cast<size_t>(q)].data(), bytes);
        break;
      case Collective::AllToAll:
        o.resize(bytes * static_cast<size_t>(R));
        for (int q = 0; q < R; ++q)
          if (bytes)
            std::memcpy(o.data() + static_cast<size_t>(q) * bytes,
                        sends[static_cast<size_t>(q)].data() + static_cast<size_t>(r) * bytes, bytes);
        break;
      default: break;
    }
  }
  return out;
}

namespace {

/// Runs fn(lo, hi) over [0, n) split into `threads` ranges.
template <typename F>
void parallel(size_t n, int threads, F fn) {
  if (threads <= 1 || n < (1u << 16)) {
    fn(size_t{0}, n);
    return;
  }
  std::vector<std::thread> ts;
  size_t per = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  for (int t = 0; t < threads; ++t) {
    size_t lo = static_cast<size_t>(t) * per, hi = std::min(n, lo + per);
    if (lo < hi) ts.emplace_back(fn, lo, hi);
  }
  for (auto& t : ts) t.join();
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<uint8_t> reference_for_rank(Collective c, int dtype, int op, int root, size_t count, int rank,
                                        const std::vector<std::vector<uint8_t>>& sends,
                                        const std::vector<uint8_t>& untouched, int threads) {
  const int R = static_cast<int>(sends.size());
  const size_t esz = dtype_size(dtype);
  const size_t bytes = count * esz;
  std::vector<uint8_t> o;
  auto reduce_block = [&](size_t offset_bytes) {
    std::vector<uint8_t> acc(bytes);
    parallel(count, threads, [&](size_t lo, size_t hi) {
      if (hi <= lo) return;
      std::memcpy(acc.data() + lo * esz, sends[0].data() + offset_bytes + lo * esz, (hi - lo) * esz);
      for (int q = 1; q < R; ++q)
        combine(dtype, op, acc.data() + lo * esz, acc.data() + lo * esz,
                sends[static_cast<size_t>(q)].data() + offset_bytes + lo * esz, hi - lo);
      if (divides(op)) divide(dtype, acc.data() + lo * esz, hi - lo, R);
    });
    return acc;
  };
  switch (c) {
    case Collective::AllReduce: return reduce_block(0);
    case Collective::Reduce: return rank == root ? reduce_block(0) : untouched;
    case Collective::Broadcast: return sends[static_cast<size_t>(root)];
    case Collective::ReduceScatter: return reduce_block(static_cast<size_t>(rank) * bytes);
    case Collective::AllGather:
      o.resize(bytes * static_cast<size_t>(R));
      for (int q = 0; q < R; ++q)
        if (bytes) std::memcpy(o.data() + static_cast<size_t>(q) * bytes, sends[static_cast<size_t>(q)].data(), bytes);
      return o;
    case Collective::AllToAll:
      o.resize(bytes * static_cast<size_t>(R));
      for (int q = 0; q < R; ++q)
        if (bytes)
          std::memcpy(o.data() + static_cast<size_t>(q) * bytes,
                      sends[static_cast<size_t>(q)].data() + static_cast<size_t>(rank) * bytes, bytes);
      return o;
    default: return o;
  }
}

void fill_random(int dtype, int op, void* data, size_t n, uint64_t seed, int threads) {
  // Products stay exact with values in {-2..2} for a few ranks; sums with small magnitudes.
  const int lo = op == kOpProd ? -2 : -16, span = op == kOpProd ? 5 : 33;
  auto* p = static_cast<uint8_t*>(data);
  const uint64_t key = mix(seed);
  with_host_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const bool unsigned_type = ::weft::is_unsigned(static_cast<DataType>(dtype));
    parallel(n, threads, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        int v = lo + static_cast<int>(mix(key ^ i) % static_cast<uint64_t>(span));
        if (unsigned_type && v < 0) v = -v;
        T x;
        if constexpr (std::is_same_v<T, Half>) x = Half{float_to_half(static_cast<float>(v))};
        else if constexpr (std::is_same_v<T, Bf16>) x = Bf16{float_to_bf16(static_cast<float>(v))};
        else x = static_cast<T>(v);
        std::memcpy(p + i * sizeof(T), &x, sizeof(T));
      }
    });
  });
}

}  // namespace weft::host
