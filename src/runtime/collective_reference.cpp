#include "runtime/collective_reference.hpp"

#include <cstring>
#include <random>

#include "runtime/host_reduce.hpp"
#include "weft/weft.h"

namespace weft::host {

size_t send_elems(Collective c, size_t count, int R) {
  switch (c) {
    case Collective::ReduceScatter:
    case Collective::AllToAll: return count * static_cast<size_t>(R);
    default: return count;
  }
}

size_t recv_elems(Collective c, size_t count, int R) {
  switch (c) {
    case Collective::AllGather:
    case Collective::AllToAll: return count * static_cast<size_t>(R);
    default: return count;
  }
}

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
    if (op == weftAvg) divide(dtype, acc.data(), count, R);
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

void fill_random(int dtype, int op, void* data, size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  // Products stay exact with values in {-2..2} for a few ranks; sums with small magnitudes.
  const int lo = op == weftProd ? -2 : -16, hi = op == weftProd ? 2 : 16;
  std::uniform_int_distribution<int> dist(lo, hi);
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    int v = dist(gen);
    bool is_unsigned = dtype == weftUint8 || dtype == weftUint32 || dtype == weftUint64;
    if (is_unsigned && v < 0) v = -v;
    switch (dtype) {
      case weftInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p + i, &x, 1); break; }
      case weftUint8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(p + i, &x, 1); break; }
      case weftInt32: { int32_t x = v; std::memcpy(p + i * 4, &x, 4); break; }
      case weftUint32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(p + i * 4, &x, 4); break; }
      case weftInt64: { int64_t x = v; std::memcpy(p + i * 8, &x, 8); break; }
      case weftUint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(p + i * 8, &x, 8); break; }
      case weftFloat16: { uint16_t x = float_to_half(static_cast<float>(v)); std::memcpy(p + i * 2, &x, 2); break; }
      case weftBfloat16: { uint16_t x = float_to_bf16(static_cast<float>(v)); std::memcpy(p + i * 2, &x, 2); break; }
      case weftFloat32: { float x = static_cast<float>(v); std::memcpy(p + i * 4, &x, 4); break; }
      case weftFloat64: { double x = v; std::memcpy(p + i * 8, &x, 8); break; }
      default: break;
    }
  }
}

}  // namespace weft::host
