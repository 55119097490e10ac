#include "nccl/fallback.hpp"

#include <dlfcn.h>

#include <mutex>
#include <set>

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

struct Loaded {
  RealNccl real;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const std::string path = config::get_string("WEFT_NCCL_FALLBACK");
  if (path.empty()) {
    l.why = "no fallback is configured (set WEFT_NCCL_FALLBACK to the path of a real libnccl.so.2)";
    return l;
  }
  // DEEPBIND: the real library's calls to its own exported functions must not resolve to
  // weft's functions of the same names, which come first in the global scope.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = "WEFT_NCCL_FALLBACK=" + path + " cannot be opened: " + (e ? e : "unknown reason");
    return l;
  }
  RealNccl& r = l.real;
  r.path = path;
  std::string missing;
  int (*get_version)(int*) = nullptr;
  bind(lib, "ncclGetVersion", get_version, &missing);
  bind(lib, "ncclGetUniqueId", r.GetUniqueId, &missing);
  bind(lib, "ncclCommInitRank", r.CommInitRank, &missing);
  bind(lib, "ncclCommDestroy", r.CommDestroy, &missing);
  bind(lib, "ncclCommAbort", r.CommAbort, &missing);
  bind(lib, "ncclCommGetAsyncError", r.CommGetAsyncError, &missing);
  bind(lib, "ncclGetLastError", r.GetLastError, &missing);
  bind(lib, "ncclAllReduce", r.AllReduce, &missing);
  bind(lib, "ncclReduce", r.Reduce, &missing);
  bind(lib, "ncclReduceScatter", r.ReduceScatter, &missing);
  bind(lib, "ncclGroupStart", r.GroupStart, &missing);
  bind(lib, "ncclGroupEnd", r.GroupEnd, &missing);
  bind(lib, "ncclRedOpCreatePreMulSum", r.RedOpCreatePreMulSum, &missing);
  bind(lib, "ncclRedOpDestroy", r.RedOpDestroy, &missing);
  r.CommInitRankConfig = reinterpret_cast<decltype(r.CommInitRankConfig)>(dlsym(lib, "ncclCommInitRankConfig"));
  if (!missing.empty()) {
    l.why = "WEFT_NCCL_FALLBACK=" + path + " lacks " + missing + "; is it NCCL 2.11 or later?";
    dlclose(lib);
    return l;
  }
  // The real library must not be weft itself (a libnccl.so.2 that is this library).
  if (reinterpret_cast<void*>(get_version) == reinterpret_cast<void*>(&ncclGetVersion) || get_version == nullptr ||
      get_version(&r.version) != 0) {
    l.why = "WEFT_NCCL_FALLBACK=" + path + " is not a working NCCL (it is weft, or ncclGetVersion failed)";
    dlclose(lib);
    return l;
  }
  l.ok = true;
  WEFT_LOG(Info, "NCCL", "fallback NCCL " << r.version << " loaded from " << path);
  return l;
}

}  // namespace

const RealNccl* real_nccl(std::string* why) {
  static const Loaded loaded = [] {
    Loaded l = load();
    if (!l.ok && !config::get_string("WEFT_NCCL_FALLBACK").empty())
      WEFT_LOG(Warn, "NCCL", "the NCCL fallback is unavailable: " << l.why);
    return l;
  }();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.real;
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

}  // namespace weft::nccl
