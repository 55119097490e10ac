#include "bootstrap/peer_check.hpp"

#include <map>
#include <mutex>
#include <string>

#include "util/error.hpp"

namespace weft::peer_check {

namespace {

std::mutex& arenas_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<uintptr_t, size_t>& arenas() {
  static std::map<uintptr_t, size_t> m;
  return m;
}

}  // namespace

void field_in_range(int me, int peer, const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return;
  fail(ErrorCode::Remote, "rank " + std::to_string(me) + ": rank " + std::to_string(peer) + " sent " + field + " = " +
                              std::to_string(value) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
}

void register_arena(const void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(arenas_mutex());
  arenas()[reinterpret_cast<uintptr_t>(base)] = bytes;
}

void unregister_arena(const void* base) {
  std::lock_guard<std::mutex> lock(arenas_mutex());
  arenas().erase(reinterpret_cast<uintptr_t>(base));
}

void check_local_arena(int me, int peer, uint64_t ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(arenas_mutex());
  auto it = arenas().find(static_cast<uintptr_t>(ptr));
  if (it != arenas().end() && it->second == bytes) return;
  fail(ErrorCode::Remote, "rank " + std::to_string(me) + ": rank " + std::to_string(peer) +
                              " says it shares this process but its arena pointer " + std::to_string(ptr) +
                              (it == arenas().end() ? " is no arena of this process"
                                                    : " names an arena of " + std::to_string(it->second) +
                                                          " bytes, not " + std::to_string(bytes)));
}

}  // namespace weft::peer_check
