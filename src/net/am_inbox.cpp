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

const AmInbox::Peer* AmInbox::peer_of(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? &peers_[static_cast<size_t>(peer)] : nullptr;
}

bool AmInbox::admissible(int peer, uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Peer* p = peer_of(peer);
  return p != nullptr && seq >= p->prefix && seq - p->prefix < kWindow && p->early.count(seq) == 0;
}

bool AmInbox::landed(int peer, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer_of(peer) == nullptr) return false;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (seq < p.prefix || seq - p.prefix >= kWindow) return false;
  if (seq == p.prefix) {
    ++p.prefix;
    while (!p.early.empty() && *p.early.begin() == p.prefix) {
      p.early.erase(p.early.begin());
      ++p.prefix;
    }
  } else {
    if (p.early.size() >= kMaxWaiting || !p.early.insert(seq).second) return false;
  }
  drain(p);
  return true;
}

bool AmInbox::signal(int peer, uint64_t seq, uint64_t after, uint64_t* where, const uint64_t* values, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer_of(peer) == nullptr) return false;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (seq < p.next_signal || seq - p.next_signal >= kMaxWaiting || p.signals.size() >= kMaxWaiting ||
      p.signals.count(seq) != 0)
    return false;
  if (seq == p.next_signal && after <= p.prefix) {
    write(where, values, n);
    ++p.next_signal;
    drain(p);
    return true;
  }
  p.signals.emplace(seq, Signal{after, where, std::vector<uint64_t>(values, values + n)});
  return true;
}

void AmInbox::write(uint64_t* where, const uint64_t* values, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) std::atomic_ref<uint64_t>(where[i]).store(values[i], std::memory_order_release);
}

void AmInbox::drain(Peer& p) {
  while (!p.signals.empty()) {
    auto it = p.signals.begin();
    if (it->first != p.next_signal || it->second.after > p.prefix) break;
    write(it->second.where, it->second.values.data(), it->second.values.size());
    p.signals.erase(it);
    ++p.next_signal;
  }
}

size_t AmInbox::waiting(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Peer* p = peer_of(peer);
  return p != nullptr ? p->signals.size() : 0;
}

uint64_t AmInbox::prefix(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Peer* p = peer_of(peer);
  return p != nullptr ? p->prefix : 0;
}

size_t AmInbox::early(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Peer* p = peer_of(peer);
  return p != nullptr ? p->early.size() : 0;
}

}  // namespace weft::net
