// Contribution sets for the symbolic verifier.
//
// Every chunk slot of every rank holds the set of input contributions (rank, input chunk)
// that its data is made of. The verifier touches millions of slots (HM AllReduce at 1,024
// ranks has a million slots and two million transfers), so sets are small handles into
// one store rather than heap-allocated containers:
//
//   - Empty;
//   - Single: one contribution, held inline in the cell (no allocation);
//   - Bits: contributions that all share one input chunk index, as a bitset over ranks
//     (the common case: a partially reduced chunk of a reduction collective);
//   - List: the general fallback, a sorted list of contributions with mixed chunk indices.
//
// Bitsets and lists are reference counted, so a copy (dst := src) costs O(1) and shares
// the set; a reduction mutates a set in place when no other slot shares it. Sets are kept
// canonical (a one-element set is Single; a set with one chunk index is Bits), so two
// equal sets have the same kind. All allocation is counted against a byte budget, which
// turns an input too large to verify into an error instead of exhausting memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace weft::verify_detail {

/// One contribution: input chunk `chunk` of rank `rank`.
struct Contribution {
  int32_t rank;
  int32_t chunk;
  bool operator==(const Contribution&) const = default;
};

enum class CellKind : uint8_t { Empty, Single, Bits, List };

/// A slot's contribution set: a handle into a ContributionStore (12 bytes).
struct Cell {
  int32_t chunk = 0;  ///< Single, Bits: the input chunk index
  int32_t value = 0;  ///< Single: the rank; Bits, List: the handle in the store
  CellKind kind = CellKind::Empty;
};

/// Thrown (as weft::Error(Verify)) when the store would exceed its byte budget.
class ContributionStore {
 public:
  /// `ranks` bounds the rank of every contribution; `budget_bytes` bounds what the store
  /// allocates for bitsets and lists together.
  ContributionStore(int32_t ranks, uint64_t budget_bytes);

  /// A cell holding the single contribution (rank, chunk).
  static Cell single(int32_t rank, int32_t chunk) { return Cell{chunk, rank, CellKind::Single}; }

  /// dst := src (shares src's set).
  void assign(Cell& dst, const Cell& src);
  /// dst := dst union src. Both must be non-empty. Mutates dst's set in place when it is
  /// not shared.
  void unite(Cell& dst, const Cell& src);
  /// Whether the two sets share a contribution; if so, writes one shared contribution.
  bool intersects(const Cell& a, const Cell& b, Contribution* common) const;
  /// Number of contributions.
  uint64_t size(const Cell& c) const;
  /// Whether c holds exactly every rank's contribution of input chunk `chunk`.
  bool is_all_ranks(const Cell& c, int32_t chunk) const;
  /// The contributions in (rank, chunk) order.
  std::vector<Contribution> list(const Cell& c) const;
  /// Releases the cell's set and makes it empty.
  void clear(Cell& c);

  /// Bytes held by bitsets and lists now, and at most so far.
  uint64_t bytes() const { return bytes_; }
  uint64_t peak_bytes() const { return peak_; }

 private:
  static uint64_t pack(Contribution c) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(c.rank)) << 32) | static_cast<uint32_t>(c.chunk);
  }
  static Contribution unpack(uint64_t v) {
    return {static_cast<int32_t>(v >> 32), static_cast<int32_t>(v & 0xffffffffu)};
  }
  uint64_t* bits(int32_t h) {
    return pages_[h / kSetsPerPage].get() + static_cast<size_t>(h % kSetsPerPage) * words_per_set_;
  }
  const uint64_t* bits(int32_t h) const {
    return pages_[h / kSetsPerPage].get() + static_cast<size_t>(h % kSetsPerPage) * words_per_set_;
  }
  int32_t new_bits();
  int32_t new_list();
  void retain(const Cell& c);
  void release(const Cell& c);
  void charge(int64_t delta);
  /// Turns dst into a List cell it owns alone, holding its current contributions.
  void make_owned_list(Cell& dst);

  int32_t ranks_;
  size_t words_per_set_;
  uint64_t budget_;
  uint64_t bytes_ = 0;
  uint64_t peak_ = 0;

  // Bitsets live in fixed pages (no reallocation copies as the store grows); bitset h is
  // the W words at offset (h % kSetsPerPage) * W of page h / kSetsPerPage.
  static constexpr int32_t kSetsPerPage = 1024;
  std::vector<std::unique_ptr<uint64_t[]>> pages_;
  std::vector<uint32_t> bits_refs_;  // reference count of bitset h; 0: free
  std::vector<int32_t> bits_free_;
  std::vector<std::vector<uint64_t>> lists_;  // sorted packed contributions
  std::vector<uint32_t> list_refs_;
  std::vector<int32_t> list_free_;
};

}  // namespace weft::verify_detail
