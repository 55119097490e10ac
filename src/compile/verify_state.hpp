// Internals shared by the verifier's execution (verify.cpp) and its postconditions
// (postcondition.cpp): where each canonical slot lives in the flat state, and how errors
// are collected and worded.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compile/contribution_set.hpp"
#include "ir/algorithm.hpp"

namespace weft::verify_detail {

/// Maps canonical slots to indices of one flat array. Buffers that in-place aliasing folds
/// into another (see canonical_slot) take no room.
class SlotLayout {
 public:
  explicit SlotLayout(const Algorithm& algo);
  /// Index of a canonical slot (the caller has canonicalized it and checked its range).
  int64_t index(SlotRef canonical) const {
    int b = static_cast<int>(canonical.buffer);
    return base_[b] + static_cast<int64_t>(canonical.rank) * chunks_[b] + canonical.index;
  }
  /// Index of any slot, through canonical_slot.
  int64_t index_of(SlotRef slot) const { return index(canonical_slot(algo_, slot)); }
  int64_t total() const { return total_; }

 private:
  const Algorithm& algo_;
  int64_t base_[3] = {0, 0, 0};
  int64_t chunks_[3] = {0, 0, 0};
  int64_t total_ = 0;
};

/// "rank 3's output chunk 5".
std::string describe_slot(SlotRef slot);
/// "rank 3's input chunk 5" (a contribution is always an input chunk).
std::string describe_contribution(Contribution c);
/// Up to `limit` contributions, "a, b and c" (with "and N more" past the limit).
std::string describe_contributions(const std::vector<Contribution>& items, size_t limit = 4);

/// Collects error sentences up to a limit, counting all.
class ErrorSink {
 public:
  explicit ErrorSink(size_t limit) : limit_(limit) {}
  void add(std::string message) {
    ++count_;
    if (messages_.size() < limit_) messages_.push_back(std::move(message));
  }
  /// Counts an error without wording it (once the limit is reached, wording is wasted work).
  void count_only() { ++count_; }
  bool full() const { return messages_.size() >= limit_; }
  size_t count() const { return count_; }
  std::vector<std::string>& messages() { return messages_; }

 private:
  size_t limit_;
  size_t count_ = 0;
  std::vector<std::string> messages_;
};

/// Describes what last wrote a slot (by flat index), e.g. "last written at step 7 by
/// transfer 12 at f.rccl:9:13", or returns empty when nothing wrote it.
using HistoryFn = std::function<std::string(int64_t)>;

/// Checks the collective's postcondition on the final state, adding one error per wrong
/// slot (with the slot's last writer, from `history`). Throws weft::Error(Verify) when the
/// postcondition itself cannot be stated (an AllToAll whose input does not split evenly,
/// a Custom expectation out of range).
void check_postcondition(const Algorithm& algo, const SlotLayout& layout, const ContributionStore& store,
                         const std::vector<Cell>& cells, const HistoryFn& history, ErrorSink& errors);

}  // namespace weft::verify_detail
