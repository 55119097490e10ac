// The live handles of one kind (weftComm_t, ncclComm_t). A handle is live from add() until
// retire(); callers check live() before they dereference a handle a user passed in, so a
// destroyed, never-created or garbage handle is an error instead of a use after free.
// Callers never free a retired handle's own small object (only what it owns), so its
// address is never handed out again: a stale handle cannot alias a newer communicator.
#pragma once

#include <mutex>
#include <unordered_set>

namespace weft {

class HandleRegistry {
 public:
  void add(const void* h) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(h);
  }
  /// Marks `h` dead; false when it was not live (destroyed twice, or never made).
  bool retire(const void* h) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(h) == 1;
  }
  bool live(const void* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(h) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const void*> live_;
};

}  // namespace weft
