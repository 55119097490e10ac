// InlineVector (Slot::deps, Slot::tasks): in-place storage up to N, heap beyond, value
// semantics like std::vector, and a Slot that stays small.
#include <gtest/gtest.h>

#include <vector>

#include "ir/inline_vector.hpp"
#include "ir/plan.hpp"

namespace weft {
namespace {

TEST(InlineVector, StaysInPlaceThenSpills) {
  InlineVector<int32_t, 2> v;
  EXPECT_TRUE(v.empty());
  v.push_back(1);
  v.push_back(2);
  EXPECT_EQ(v.capacity(), 2u);  // still in place
  v.push_back(3);
  v.push_back(v[0]);  // an element of the vector itself, across a growth
  EXPECT_GE(v.capacity(), 4u);
  EXPECT_EQ(std::vector<int32_t>(v), (std::vector<int32_t>{1, 2, 3, 1}));
  v.pop_back();
  EXPECT_EQ(v.back(), 3);
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(InlineVector, CopiesMovesAndCompares) {
  for (size_t n : {0u, 1u, 2u, 3u, 40u}) {
    std::vector<int32_t> ref;
    for (size_t i = 0; i < n; ++i) ref.push_back(static_cast<int32_t>(7 * i + 1));
    InlineVector<int32_t, 2> a(ref);
    EXPECT_EQ(a.size(), n);
    InlineVector<int32_t, 2> b = a;  // copy
    EXPECT_TRUE(a == b);
    InlineVector<int32_t, 2> c = std::move(b);  // move
    EXPECT_TRUE(c == a);
    EXPECT_TRUE(b.empty());  // NOLINT: moved-from is empty by contract
    InlineVector<int32_t, 2> d{5};
    d = c;  // copy assignment over a smaller one
    EXPECT_TRUE(d == a);
    d = InlineVector<int32_t, 2>{9, 9, 9};  // move assignment
    EXPECT_EQ(std::vector<int32_t>(d), (std::vector<int32_t>{9, 9, 9}));
    d.assign(d.begin(), d.begin() + 1);  // from its own storage
    EXPECT_EQ(std::vector<int32_t>(d), (std::vector<int32_t>{9}));
    if (n > 0) {
      c.back() = -1;
      EXPECT_FALSE(c == a);
    }
  }
}

TEST(InlineVector, SlotListsCompareAndConvertLikeVectors) {
  Slot s;
  s.deps = std::vector<SlotDep>{{1, 2}, {3, 4}, {5, 6}};
  s.tasks = {7};
  Slot t = s;
  EXPECT_EQ(s, t);
  t.deps[2].slot = 0;
  EXPECT_NE(s, t);
  std::vector<SlotDep> deps = s.deps;
  EXPECT_EQ(deps.size(), 3u);
  // Two of each list live inside the slot (no heap block for the common case).
  EXPECT_LE(sizeof(Slot), 96u);
}

}  // namespace
}  // namespace weft
