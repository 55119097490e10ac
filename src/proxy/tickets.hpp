// The copy-engine endpoint's marks (proxy/copy_engine.hpp), CUDA-free so that they are unit
// tested (tests/unit/proxy/test_tickets.cpp). Ticket t (1, 2, ...) lives in slot (t - 1) %
// kSlots until it has landed; it is either a CUDA event recorded on the stream or a stream
// write of t into one page-locked word. The stream runs in order, so once the word holds w,
// every ticket up to w has landed, events included; an event ticket lands when its event says
// so. At most kSlots tickets are outstanding (the caller waits for the oldest before issuing).
#pragma once

#include <cstdint>

namespace weft::proxy {

class TicketRing {
 public:
  static constexpr uint64_t kSlots = 128;
  bool full() const { return marked_ - landed_ == kSlots; }
  /// The slot the next ticket takes (its event's, for an event ticket).
  uint64_t next_slot() const { return marked_ % kSlots; }
  uint64_t next_ticket() const { return marked_ + 1; }
  /// Issues the next ticket; `by_word`: the stream writes it into the word (else an event).
  uint64_t issue(bool by_word) {
    by_word_[marked_ % kSlots] = by_word;
    return ++marked_;
  }
  /// Whether `ticket` has landed, given the word's value now; event_landed(slot) says whether
  /// the event of an event ticket in `slot` has (it may throw the event's error).
  template <class EventLanded>
  bool landed(uint64_t ticket, uint64_t word, EventLanded&& event_landed) {
    while (landed_ < ticket && landed_ < marked_) {
      if (word > landed_) {  // the stream passed ticket `word`: everything before it ran
        landed_ = word < marked_ ? word : marked_;
        continue;
      }
      const uint64_t slot = landed_ % kSlots;
      if (by_word_[slot] || !event_landed(slot)) return false;
      ++landed_;
    }
    return landed_ >= ticket;
  }
  /// Everything issued has landed (a flush saw the stream idle).
  void all_landed() { landed_ = marked_; }
  uint64_t marked() const { return marked_; }
  uint64_t landed() const { return landed_; }

 private:
  uint64_t marked_ = 0, landed_ = 0;
  bool by_word_[kSlots] = {};
};

}  // namespace weft::proxy
