#include "compile/contribution_set.hpp"

#include <algorithm>
#include <bit>
#include <iterator>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::verify_detail {

ContributionStore::ContributionStore(int32_t ranks, uint64_t budget_bytes)
    : ranks_(ranks), words_per_set_((static_cast<size_t>(ranks) + 63) / 64), budget_(budget_bytes) {}

void ContributionStore::charge(int64_t delta) {
  if (delta > 0 && bytes_ + static_cast<uint64_t>(delta) > budget_)
    fail(ErrorCode::Verify, text::format("the symbolic state needs more than its memory budget of %llu MiB; "
                                         "the algorithm is too large to verify",
                                         static_cast<unsigned long long>(budget_ >> 20)));
  bytes_ = static_cast<uint64_t>(static_cast<int64_t>(bytes_) + delta);
  peak_ = std::max(peak_, bytes_);
}

int32_t ContributionStore::new_bits() {
  int32_t h;
  if (!bits_free_.empty()) {
    h = bits_free_.back();
    bits_free_.pop_back();
  } else {
    h = static_cast<int32_t>(bits_refs_.size());
    if (h % kSetsPerPage == 0) {
      size_t words = static_cast<size_t>(kSetsPerPage) * words_per_set_;
      charge(static_cast<int64_t>(words * sizeof(uint64_t)));
      pages_.emplace_back(new uint64_t[words]);
    }
    bits_refs_.push_back(0);
  }
  bits_refs_[h] = 1;
  std::fill_n(bits(h), words_per_set_, 0);
  return h;
}

int32_t ContributionStore::new_list() {
  int32_t h;
  if (!list_free_.empty()) {
    h = list_free_.back();
    list_free_.pop_back();
  } else {
    h = static_cast<int32_t>(lists_.size());
    lists_.emplace_back();
    list_refs_.push_back(0);
  }
  list_refs_[h] = 1;
  return h;
}

void ContributionStore::retain(const Cell& c) {
  if (c.kind == CellKind::Bits)
    ++bits_refs_[c.value];
  else if (c.kind == CellKind::List)
    ++list_refs_[c.value];
}

void ContributionStore::release(const Cell& c) {
  if (c.kind == CellKind::Bits) {
    if (--bits_refs_[c.value] == 0) bits_free_.push_back(c.value);
  } else if (c.kind == CellKind::List) {
    if (--list_refs_[c.value] == 0) {
      std::vector<uint64_t>& l = lists_[c.value];
      charge(-static_cast<int64_t>(l.capacity() * sizeof(uint64_t)));
      std::vector<uint64_t>().swap(l);
      list_free_.push_back(c.value);
    }
  }
}

void ContributionStore::assign(Cell& dst, const Cell& src) {
  retain(src);
  release(dst);
  dst = src;
}

void ContributionStore::clear(Cell& c) {
  release(c);
  c = Cell{};
}

uint64_t ContributionStore::size(const Cell& c) const {
  switch (c.kind) {
    case CellKind::Empty:
      return 0;
    case CellKind::Single:
      return 1;
    case CellKind::Bits: {
      uint64_t n = 0;
      const uint64_t* b = bits(c.value);
      for (size_t w = 0; w < words_per_set_; ++w) n += std::popcount(b[w]);
      return n;
    }
    case CellKind::List:
      return lists_[c.value].size();
  }
  return 0;
}

bool ContributionStore::is_all_ranks(const Cell& c, int32_t chunk) const {
  if (ranks_ == 1) return c.kind == CellKind::Single && c.value == 0 && c.chunk == chunk;
  if (c.kind != CellKind::Bits || c.chunk != chunk) return false;
  const uint64_t* b = bits(c.value);
  size_t full = static_cast<size_t>(ranks_) / 64;
  for (size_t w = 0; w < full; ++w)
    if (b[w] != ~uint64_t{0}) return false;
  int tail = ranks_ % 64;
  return tail == 0 || b[full] == (uint64_t{1} << tail) - 1;
}

std::vector<Contribution> ContributionStore::list(const Cell& c) const {
  std::vector<Contribution> out;
  switch (c.kind) {
    case CellKind::Empty:
      break;
    case CellKind::Single:
      out.push_back({c.value, c.chunk});
      break;
    case CellKind::Bits: {
      const uint64_t* b = bits(c.value);
      for (size_t w = 0; w < words_per_set_; ++w)
        for (uint64_t x = b[w]; x; x &= x - 1)
          out.push_back({static_cast<int32_t>(w * 64 + std::countr_zero(x)), c.chunk});
      break;
    }
    case CellKind::List:
      out.reserve(lists_[c.value].size());
      for (uint64_t v : lists_[c.value]) out.push_back(unpack(v));
      break;
  }
  return out;
}

bool ContributionStore::intersects(const Cell& a, const Cell& b, Contribution* common) const {
  if (a.kind == CellKind::Empty || b.kind == CellKind::Empty) return false;
  // Both single-chunk (Single or Bits): they meet only on the same chunk index.
  bool a_uniform = a.kind != CellKind::List, b_uniform = b.kind != CellKind::List;
  if (a_uniform && b_uniform) {
    if (a.chunk != b.chunk) return false;
    if (a.kind == CellKind::Single && b.kind == CellKind::Single) {
      if (a.value != b.value) return false;
      *common = {a.value, a.chunk};
      return true;
    }
    if (a.kind == CellKind::Single || b.kind == CellKind::Single) {
      const Cell& s = a.kind == CellKind::Single ? a : b;
      const Cell& m = a.kind == CellKind::Single ? b : a;
      if (!((bits(m.value)[s.value / 64] >> (s.value % 64)) & 1)) return false;
      *common = {s.value, s.chunk};
      return true;
    }
    const uint64_t* x = bits(a.value);
    const uint64_t* y = bits(b.value);
    for (size_t w = 0; w < words_per_set_; ++w)
      if (uint64_t both = x[w] & y[w]) {
        *common = {static_cast<int32_t>(w * 64 + std::countr_zero(both)), a.chunk};
        return true;
      }
    return false;
  }
  // General case: walk the smaller set, probe the other.
  std::vector<Contribution> la = list(a), lb = list(b);
  if (la.size() > lb.size()) std::swap(la, lb);
  std::vector<uint64_t> pb;
  pb.reserve(lb.size());
  for (Contribution c : lb) pb.push_back(pack(c));
  for (Contribution c : la)
    if (std::binary_search(pb.begin(), pb.end(), pack(c))) {
      *common = c;
      return true;
    }
  return false;
}

void ContributionStore::make_owned_list(Cell& dst) {
  if (dst.kind == CellKind::List && list_refs_[dst.value] == 1) return;
  std::vector<Contribution> items = list(dst);
  int32_t h = new_list();
  std::vector<uint64_t>& l = lists_[h];
  l.reserve(items.size());
  for (Contribution c : items) l.push_back(pack(c));
  charge(static_cast<int64_t>(l.capacity() * sizeof(uint64_t)));
  release(dst);
  dst = Cell{0, h, CellKind::List};
}

void ContributionStore::unite(Cell& dst, const Cell& src) {
  WEFT_ASSERT(dst.kind != CellKind::Empty && src.kind != CellKind::Empty, "unite() needs two non-empty sets");
  bool dst_uniform = dst.kind != CellKind::List, src_uniform = src.kind != CellKind::List;
  if (dst_uniform && src_uniform && dst.chunk == src.chunk) {
    // Bits result: make dst an unshared bitset, then OR src in.
    if (dst.kind == CellKind::Single) {
      int32_t rank = dst.value;
      int32_t h = new_bits();
      bits(h)[rank / 64] |= uint64_t{1} << (rank % 64);
      dst = Cell{dst.chunk, h, CellKind::Bits};
    } else if (bits_refs_[dst.value] > 1) {
      int32_t h = new_bits();
      std::copy_n(bits(dst.value), words_per_set_, bits(h));
      release(dst);
      dst.value = h;
    }
    uint64_t* d = bits(dst.value);
    if (src.kind == CellKind::Single) {
      d[src.value / 64] |= uint64_t{1} << (src.value % 64);
    } else {
      const uint64_t* s = bits(src.value);
      for (size_t w = 0; w < words_per_set_; ++w) d[w] |= s[w];
    }
    return;
  }
  // Mixed chunk indices: the general list.
  make_owned_list(dst);
  std::vector<uint64_t>& l = lists_[dst.value];
  std::vector<uint64_t> add;
  for (Contribution c : list(src)) add.push_back(pack(c));
  std::vector<uint64_t> merged;
  merged.reserve(l.size() + add.size());
  std::set_union(l.begin(), l.end(), add.begin(), add.end(), std::back_inserter(merged));
  charge(static_cast<int64_t>(merged.capacity()) * 8 - static_cast<int64_t>(l.capacity()) * 8);
  l.swap(merged);
}

}  // namespace weft::verify_detail
