#include "net/am_inbox.hpp"

#include <atomic>


namespace weft::net {

char* AmInbox::locate(uint64_t address, uint64_t bytes, uint64_t align) const {
  if (align == 0 || address % align != 0) return nullptr;
  std::lock_guard<std::mutex> lock(memories_mu_);
  for (const Range& m : memories_)
    if (address >= m.base && address - m.base <= m.bytes && bytes <= m.bytes - (address - m.base))
      return reinterpret_cast<char*>(address);
  return nullptr;
}

void AmInbox::landed(int peer) {
  Peer& p = peers_.at(static_cast<size_t>(peer));
  ++p.landed;
  drain(p);
}

bool AmInbox::signal(int peer, uint64_t after, uint64_t* where, const uint64_t* values, uint64_t n) {
  Peer& p = peers_.at(static_cast<size_t>(peer));
  if (p.signals.empty() && after <= p.landed) {
    write(where, values, n);
    return true;
  }
  if (p.signals.size() >= kMaxWaiting) return false;
  p.signals.push_back(Signal{after, where, std::vector<uint64_t>(values, values + n)});
  return true;
}

void AmInbox::write(uint64_t* where, const uint64_t* values, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) std::atomic_ref<uint64_t>(where[i]).store(values[i], std::memory_order_release);
}

void AmInbox::drain(Peer& p) {
  while (!p.signals.empty() && p.signals.front().after <= p.landed) {
    const Signal& s = p.signals.front();
    write(s.where, s.values.data(), s.values.size());
    p.signals.pop_front();
  }
}

}  // namespace weft::net
