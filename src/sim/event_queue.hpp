// EventQueue: the engine's timeline, a radix heap of (time, thread block, version).
//
// Simulated time never goes back: every event is scheduled at or after the last one
// popped. A radix heap exploits that (Ahuja, Mehlhorn, Orlin and Tarjan): an entry sits in
// the bucket numbered by the highest bit in which its key differs from the last key
// popped; popping empties bucket 0 (keys equal to the last) or redistributes the lowest
// non-empty bucket around its minimum. Each entry moves down at most 64 times and usually
// once or twice, with no comparisons that branch on random data, which made it several
// times faster than a 4-ary heap here. Keys are the IEEE-754 bits of non-negative times,
// which order like the times. Buckets are flat vectors that keep their capacity: no
// allocation per event once warm. Entries of equal time pop in a fixed order (last pushed
// first), so runs are deterministic. An entry whose version no longer matches its thread
// block's is stale (the block's activity was rescheduled); the caller drops it.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace weft::sim {

struct Event {
  double time;
  int32_t tb;
  uint32_t version;
};

class EventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  /// Adds an entry; a time before the last popped one is raised to it (only rounding can
  /// produce one).
  void push(Event e) {
    Entry x{key_of(e.time), e.tb, e.version};
    if (x.key < last_) x.key = last_;
    buckets_[bucket_of(x.key)].push_back(x);
    ++size_;
  }

  /// Removes and returns an earliest entry; the queue must not be empty.
  Event pop() {
    if (buckets_[0].empty()) {
      size_t i = 1;
      while (buckets_[i].empty()) ++i;
      std::vector<Entry>& b = buckets_[i];
      uint64_t min = b.front().key;
      for (const Entry& x : b) min = x.key < min ? x.key : min;
      last_ = min;
      for (const Entry& x : b) buckets_[bucket_of(x.key)].push_back(x);
      b.clear();
    }
    Entry x = buckets_[0].back();
    buckets_[0].pop_back();
    --size_;
    return Event{std::bit_cast<double>(x.key), x.tb, x.version};
  }

 private:
  struct Entry {
    uint64_t key;
    int32_t tb;
    uint32_t version;
  };
  static uint64_t key_of(double t) { return t > 0 ? std::bit_cast<uint64_t>(t) : 0; }
  size_t bucket_of(uint64_t key) const {
    return key == last_ ? 0 : static_cast<size_t>(64 - std::countl_zero(key ^ last_));
  }

  std::vector<Entry> buckets_[65];
  uint64_t last_ = 0;
  size_t size_ = 0;
};

}  // namespace weft::sim
