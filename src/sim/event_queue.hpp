// EventQueue: the engine's timeline, a 4-ary min-heap of (time, thread block, version).
//
// Entries are 16 bytes in one flat vector: no allocation per event once the vector has
// grown. An entry whose version no longer matches its thread block's is stale (the block's
// activity was rescheduled) and is dropped by the caller when popped. Ties in time are
// broken by thread block id, so runs are deterministic.
#pragma once

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
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  void reserve(size_t n) { heap_.reserve(n); }

  void push(Event e) {
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      size_t parent = (i - 1) / 4;
      if (!less(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  /// Removes and returns the earliest entry; the queue must not be empty.
  Event pop() {
    Event top = heap_.front();
    Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n > 0) {
      size_t i = 0;
      while (true) {
        size_t first = 4 * i + 1;
        if (first >= n) break;
        size_t best = first;
        size_t end = first + 4 < n ? first + 4 : n;
        for (size_t c = first + 1; c < end; ++c)
          if (less(heap_[c], heap_[best])) best = c;
        if (!less(heap_[best], last)) break;
        heap_[i] = heap_[best];
        i = best;
      }
      heap_[i] = last;
    }
    return top;
  }

 private:
  static bool less(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.tb < b.tb);
  }
  std::vector<Event> heap_;
};

}  // namespace weft::sim
