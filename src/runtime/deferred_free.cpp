#include "runtime/deferred_free.hpp"

#include <map>
#include <mutex>

#include "bootstrap/peer_watchdog.hpp"

namespace weft {

namespace {

struct Pending {
  Writers writers;
  std::function<void()> free_fn;
};

struct State {
  std::mutex mu;
  uint64_t next_id = 1;
  std::map<uint64_t, std::weak_ptr<DoneFlag>> flags;
  std::vector<Pending> pending;
};

State& state() {
  static State* s = new State();  // never destroyed: communicators may outlive static destruction
  return *s;
}

bool all_done(const Writers& w) {
  for (const auto& f : w.local)
    if (!f->done.load()) return false;
  if (std::chrono::steady_clock::now() >= w.grace_end) return true;
  for (const auto& p : w.remote)
    if (p.pid == 0 || process_alive(p.pid, p.start_time)) return false;  // pid 0: cannot be watched
  return true;
}

}  // namespace

std::shared_ptr<DoneFlag> make_done_flag() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t id = s.next_id++;
  auto flag = std::shared_ptr<DoneFlag>(new DoneFlag, [](DoneFlag* f) {
    State& st = state();
    {
      std::lock_guard<std::mutex> l(st.mu);
      st.flags.erase(f->id);
    }
    delete f;
  });
  flag->id = id;
  s.flags[id] = flag;
  return flag;
}

std::shared_ptr<DoneFlag> find_done_flag(uint64_t id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.flags.find(id);
  return it == s.flags.end() ? nullptr : it->second.lock();
}

bool free_when_done(Writers writers, std::function<void()> free_fn) {
  if (all_done(writers)) {
    free_fn();
    return true;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pending.push_back(Pending{std::move(writers), std::move(free_fn)});
  return false;
}

int sweep_deferred() {
  std::vector<Pending> ready;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < s.pending.size();) {
      if (all_done(s.pending[i].writers)) {
        ready.push_back(std::move(s.pending[i]));
        s.pending.erase(s.pending.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (Pending& p : ready) p.free_fn();  // outside the lock: a free may take time
  return static_cast<int>(ready.size());
}

size_t deferred_count() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.pending.size();
}

}  // namespace weft
