// Disjoint sets over ids 0..n-1, shared by the allocator (connection ends that must share a
// thread block), the deadlock check and the replay (the two ends of a rendezvous).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace weft {

/// Union-find with path halving; every set's root is its least member, so roots are
/// deterministic whatever the order of the merges.
class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }

  /// The root (least member) of x's set.
  int32_t find(int32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }

  /// Merges the sets of a and b; false when they were one set already.
  bool unite(int32_t a, int32_t b) {
    a = find(a), b = find(b);
    if (a == b) return false;
    parent_[std::max(a, b)] = std::min(a, b);
    return true;
  }

 private:
  std::vector<int32_t> parent_;
};

}  // namespace weft
