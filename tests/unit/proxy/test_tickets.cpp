// The copy-engine endpoint's tickets (proxy/tickets.hpp): event tickets land when their event
// says so, in order; a word ticket lands when the stream's word reaches it, and the word
// reaching w lands every ticket up to w, event tickets included, without asking their events.
#include <gtest/gtest.h>

#include <set>

#include "proxy/tickets.hpp"

using weft::proxy::TicketRing;

TEST(TicketRing, EventsLandInOrderAndTheWordLandsEverythingBeforeIt) {
  TicketRing r;
  std::set<uint64_t> done_slots;  // events that have completed
  std::set<uint64_t> asked;
  auto ev = [&](uint64_t slot) {
    asked.insert(slot);
    return done_slots.count(slot) > 0;
  };
  EXPECT_EQ(r.next_ticket(), 1u);
  EXPECT_EQ(r.issue(false), 1u);  // event, slot 0
  EXPECT_EQ(r.issue(true), 2u);   // word, slot 1
  EXPECT_EQ(r.issue(false), 3u);  // event, slot 2
  EXPECT_FALSE(r.landed(1, 0, ev));
  done_slots.insert(0);
  EXPECT_TRUE(r.landed(1, 0, ev));
  // Ticket 2 is the word's: its slot has no event to ask, and the word is still 1 or less.
  asked.clear();
  EXPECT_FALSE(r.landed(2, 1, ev));
  EXPECT_TRUE(asked.empty()) << "asked an event for a word ticket";
  EXPECT_FALSE(r.landed(3, 0, ev));
  // Event 3 completing does not land 3 while 2 has not (the stream runs in order).
  done_slots.insert(2);
  EXPECT_FALSE(r.landed(3, 0, ev));
  EXPECT_EQ(r.landed(), 1u);
  EXPECT_TRUE(r.landed(2, 2, ev));
  EXPECT_TRUE(r.landed(3, 2, ev));
  EXPECT_EQ(r.landed(), 3u);
  // The word passing several event tickets lands them all without asking their events.
  for (int i = 0; i < 4; ++i) r.issue(false);  // 4..7
  EXPECT_EQ(r.issue(true), 8u);
  asked.clear();
  done_slots.clear();
  EXPECT_TRUE(r.landed(8, 8, ev));
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(r.landed(), 8u);
  // A word ahead of what was issued (not possible from one stream) never lands more than issued.
  EXPECT_EQ(r.issue(false), 9u);
  EXPECT_TRUE(r.landed(9, 50, ev));
  EXPECT_EQ(r.landed(), 9u);
  EXPECT_FALSE(r.landed(10, 50, ev)) << "a ticket not issued yet";
}

TEST(TicketRing, FullAfterKSlotsOutstandingAndFreedByLandingOrFlush) {
  TicketRing r;
  for (uint64_t i = 0; i < TicketRing::kSlots; ++i) {
    EXPECT_FALSE(r.full()) << i;
    EXPECT_EQ(r.next_slot(), i % TicketRing::kSlots);
    r.issue(i % 2 == 1);  // ticket 1 an event, ticket 2 a word, ...
  }
  EXPECT_TRUE(r.full());
  EXPECT_TRUE(r.landed(1, 0, [](uint64_t) { return true; }));  // ticket 1 is an event ticket
  EXPECT_FALSE(r.full());
  EXPECT_EQ(r.next_slot(), 0u);  // slot 0 is free again
  r.issue(false);
  EXPECT_TRUE(r.full());
  r.all_landed();
  EXPECT_FALSE(r.full());
  EXPECT_EQ(r.landed(), r.marked());
}
