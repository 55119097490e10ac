#include "nccl/fallback.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "weft/nccl.h"

namespace weft::nccl {

namespace {

template <typename F>
bool bind(void* lib, const char* name, F& fn, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return fn != nullptr;
}

bool same_file(const char* a, const char* b) {
  struct stat sa {}, sb {};
  return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

std::unique_ptr<RealNccl> open_real_nccl(const std::string& path, std::string* why) {
  auto r = std::make_unique<RealNccl>();
  // DEEPBIND: the real library's calls to its own exported functions must not resolve to
  // weft's functions of the same names, which come first in the global scope.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (lib == nullptr) {
    const char* e = dlerror();
    *why = path + " cannot be opened: " + (e ? e : "unknown reason");
    return nullptr;
  }
  r->path = path;
  std::string missing;
  int (*get_version)(int*) = nullptr;
  bind(lib, "ncclGetVersion", get_version, &missing);
  bind(lib, "ncclGetUniqueId", r->GetUniqueId, &missing);
  bind(lib, "ncclCommInitRank", r->CommInitRank, &missing);
  bind(lib, "ncclCommDestroy", r->CommDestroy, &missing);
  bind(lib, "ncclCommAbort", r->CommAbort, &missing);
  bind(lib, "ncclCommGetAsyncError", r->CommGetAsyncError, &missing);
  bind(lib, "ncclGetLastError", r->GetLastError, &missing);
  bind(lib, "ncclAllReduce", r->AllReduce, &missing);
  bind(lib, "ncclReduce", r->Reduce, &missing);
  bind(lib, "ncclReduceScatter", r->ReduceScatter, &missing);
  bind(lib, "ncclGroupStart", r->GroupStart, &missing);
  bind(lib, "ncclGroupEnd", r->GroupEnd, &missing);
  bind(lib, "ncclRedOpCreatePreMulSum", r->RedOpCreatePreMulSum, &missing);
  bind(lib, "ncclRedOpDestroy", r->RedOpDestroy, &missing);
  r->CommInitRankConfig = reinterpret_cast<decltype(r->CommInitRankConfig)>(dlsym(lib, "ncclCommInitRankConfig"));
  if (!missing.empty()) {
    *why = path + " lacks " + missing + " (NCCL 2.13 or later is needed)";
    dlclose(lib);
    return nullptr;
  }
  // The fallback must not be weft itself (this library installed as libnccl.so.2).
  Dl_info mine {}, theirs {};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &mine) != 0 &&
      dladdr(reinterpret_cast<void*>(get_version), &theirs) != 0 && same_file(mine.dli_fname, theirs.dli_fname)) {
    *why = path + " is weft's own NCCL-compatible library, not a real NCCL";
    dlclose(lib);
    return nullptr;
  }
  if (get_version(&r->version) != 0) {
    *why = path + ": ncclGetVersion failed";
    dlclose(lib);
    return nullptr;
  }
  return r;
}

namespace {

struct Loaded {
  std::unique_ptr<RealNccl> real;
  std::string why;
};

Loaded load() {
  Loaded l;
  const std::string path = config::get_string("WEFT_NCCL_FALLBACK");
  if (path.empty()) {
    l.why = "no fallback is configured (set WEFT_NCCL_FALLBACK to the path of a real libnccl.so.2)";
    return l;
  }
  l.real = open_real_nccl(path, &l.why);
  if (l.real) {
    WEFT_LOG(Info, "NCCL", "fallback NCCL " << l.real->version << " loaded from " << path);
  } else {
    l.why = "WEFT_NCCL_FALLBACK=" + l.why;
  }
  return l;
}

}  // namespace

const RealNccl* real_nccl(std::string* why) {
  static const Loaded loaded = [] {
    Loaded l = load();
    if (!l.real && !config::get_string("WEFT_NCCL_FALLBACK").empty())
      WEFT_LOG(Warn, "NCCL", "the NCCL fallback is unavailable: " << l.why);
    return l;
  }();
  if (!loaded.real) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return loaded.real.get();
}

void note_forwarded(const std::string& kind) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(kind).second)
    WEFT_LOG(Warn, "NCCL", "weft forwards " << kind << " to the fallback NCCL (logged once)");
}

void check_real(const RealNccl& real, int result, const char* call, void* comm) {
  if (result == 0) return;
  const char* msg = real.GetLastError ? real.GetLastError(comm) : "";
  // ncclResult_t 1..7 share weft's ErrorCode values.
  ErrorCode code = result >= 1 && result <= 7 ? static_cast<ErrorCode>(result) : ErrorCode::Internal;
  fail(code, std::string("fallback NCCL: ") + call + " returned " + std::to_string(result) +
                 (msg && *msg ? std::string(": ") + msg : std::string()));
}

void finish_real(const RealNccl& real, int result, const char* call, void* const* comms, size_t ncomms) {
  if (result != ncclInProgress) return check_real(real, result, call, ncomms > 0 ? comms[0] : nullptr);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(config::wait_seconds(config::get_seconds("WEFT_TIMEOUT")));
  for (size_t i = 0; i < ncomms; ++i) {
    int state = ncclInProgress;
    while (true) {
      if (real.CommGetAsyncError == nullptr || real.CommGetAsyncError(comms[i], &state) != 0) state = ncclInternalError;
      if (state != ncclInProgress) break;
      if (std::chrono::steady_clock::now() > deadline)
        fail(ErrorCode::Timeout, std::string("fallback NCCL: ") + call +
                                     " still in progress after WEFT_TIMEOUT (a rank did not make the forwarded call)");
      std::this_thread::yield();
    }
    check_real(real, state, call, comms[i]);
  }
}

}  // namespace weft::nccl
