#include "nccl/group.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "util/error.hpp"

namespace weft::nccl {

namespace {

struct PendingInit {
  ncclComm* comm;
  int nranks;
  ncclUniqueId id;
  int rank;
  int device;
};

struct PendingWindow {
  ncclComm* comm;
  void* buff;
  size_t size;
  ncclWindow_t* win;
  int flags;
};

thread_local int t_depth = 0;
thread_local std::vector<PendingInit> t_inits;
thread_local std::vector<PendingWindow> t_windows;
thread_local const RealNccl* t_real_group = nullptr;
thread_local std::vector<void*> t_real_comms;  // fallback communicators used in the open group

// Communicators whose deferred initialization has not started: one destroyed before its
// ncclGroupEnd (from any thread) leaves this set, and ncclGroupEnd then skips it instead of
// initializing freed memory.
std::mutex g_pending_mu;
std::set<ncclComm*> g_pending;

// Keeps the inits whose communicator still exists, and takes them off the pending set.
std::vector<PendingInit> still_wanted(std::vector<PendingInit> inits) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  std::vector<PendingInit> kept;
  for (const PendingInit& p : inits)
    if (g_pending.erase(p.comm) != 0) kept.push_back(p);
  return kept;
}

// Runs one(0) .. one(n - 1) at the same time, each on a thread of its own (on the caller's
// thread when n is 1), and returns when all have: collective steps of several ranks that one
// thread holds must run side by side.
template <typename F>
void at_once(size_t n, F& one) {
  if (n == 1) return one(0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&one, i] { one(i); });
  for (auto& t : threads) t.join();
}

// Runs the deferred initializations: each joins its own communicator, so they must run at
// the same time when one thread holds several ranks of one communicator.
void run_inits(std::vector<PendingInit> inits, ErrorCode* code, std::string* message) {
  inits = still_wanted(std::move(inits));
  if (inits.empty()) return;
  std::vector<ErrorCode> codes(inits.size(), ErrorCode::Success);
  std::vector<std::string> messages(inits.size());
  auto one = [&](size_t i) {
    try {
      const PendingInit& p = inits[i];
      init_comm(p.comm, p.nranks, p.id, p.rank, p.device, inits.size() > 1);
    } catch (const Error& e) {
      codes[i] = e.code();
      messages[i] = e.what();
    } catch (const std::exception& e) {
      codes[i] = ErrorCode::Internal;
      messages[i] = e.what();
    }
  };
  at_once(inits.size(), one);
  for (size_t i = 0; i < inits.size(); ++i)
    if (codes[i] != ErrorCode::Success && *code == ErrorCode::Success) {
      *code = codes[i];
      *message = "ncclCommInitRank (rank " + std::to_string(inits[i].rank) + ", at ncclGroupEnd): " + messages[i];
    }
}

// Runs the deferred window registrations: each communicator's in order on a thread of its
// own (registration is collective: one thread holding several ranks must register them at
// the same time).
void run_windows(std::vector<PendingWindow> all, ErrorCode* code, std::string* message) {
  if (all.empty()) return;
  std::vector<ncclComm*> comms;
  for (const PendingWindow& w : all)
    if (std::find(comms.begin(), comms.end(), w.comm) == comms.end()) comms.push_back(w.comm);
  std::vector<ErrorCode> codes(comms.size(), ErrorCode::Success);
  std::vector<std::string> messages(comms.size());
  auto one = [&](size_t i) {
    for (const PendingWindow& w : all) {
      if (w.comm != comms[i]) continue;
      try {
        register_window(*w.comm, w.buff, w.size, w.win, w.flags);
      } catch (const Error& e) {
        if (codes[i] == ErrorCode::Success) {
          codes[i] = e.code();
          messages[i] = e.what();
        }
      } catch (const std::exception& e) {
        if (codes[i] == ErrorCode::Success) {
          codes[i] = ErrorCode::Internal;
          messages[i] = e.what();
        }
      }
    }
  };
  at_once(comms.size(), one);
  for (size_t i = 0; i < comms.size(); ++i)
    if (codes[i] != ErrorCode::Success && *code == ErrorCode::Success) {
      *code = codes[i];
      *message = "ncclCommWindowRegister (at ncclGroupEnd): " + messages[i];
    }
}

}  // namespace

bool in_group() { return t_depth > 0; }

void group_start() {
  check_weft(weftGroupStart());
  ++t_depth;
}

void group_end() {
  if (t_depth == 0) fail(ErrorCode::InvalidUsage, "ncclGroupEnd without ncclGroupStart on this thread");
  --t_depth;
  ErrorCode code = ErrorCode::Success;
  std::string message;
  if (t_depth == 0 && !t_inits.empty()) {
    std::vector<PendingInit> inits;
    inits.swap(t_inits);
    run_inits(std::move(inits), &code, &message);
  }
  if (t_depth == 0 && !t_windows.empty()) {
    std::vector<PendingWindow> windows;
    windows.swap(t_windows);
    run_windows(std::move(windows), &code, &message);
  }
  // weft's own group level (the outermost issues its sends and receives).
  weftResult_t r = weftGroupEnd();
  if (r != weftSuccess && code == ErrorCode::Success) {
    code = static_cast<ErrorCode>(r);
    message = weftGetLastError(nullptr);
  }
  if (t_depth == 0 && t_real_group != nullptr) {
    const RealNccl* real = t_real_group;
    std::vector<void*> comms;
    comms.swap(t_real_comms);
    t_real_group = nullptr;
    int rr = real->GroupEnd();
    try {
      finish_real(*real, rr, "ncclGroupEnd", comms.data(), comms.size());
    } catch (const Error& e) {
      if (code == ErrorCode::Success) {
        code = e.code();
        message = e.what();
      }
    }
  }
  if (code != ErrorCode::Success) fail(code, message);
}

void defer_init(ncclComm* c, int nranks, const ncclUniqueId& id, int rank, int device) {
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    g_pending.insert(c);
  }
  t_inits.push_back(PendingInit{c, nranks, id, rank, device});
}

void defer_window(ncclComm* c, void* buff, size_t size, ncclWindow_t* win, int flags) {
  t_windows.push_back(PendingWindow{c, buff, size, win, flags});
}

void forget_deferred(ncclComm* c) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  g_pending.erase(c);
}

bool enter_real_group(const RealNccl& real, void* comm) {
  if (t_depth == 0) return false;
  if (t_real_group == nullptr) {
    check_real(real, real.GroupStart(), "ncclGroupStart", nullptr);
    t_real_group = &real;
  }
  if (std::find(t_real_comms.begin(), t_real_comms.end(), comm) == t_real_comms.end()) t_real_comms.push_back(comm);
  return true;
}

}  // namespace weft::nccl
