#include "net/ucx_api.hpp"

#include <dlfcn.h>

#include <mutex>

namespace weft::net {

#if WEFT_HAVE_UCX
namespace {

struct Loaded {
  UcxApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool resolve(void* lib, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (out == nullptr && why.empty()) why = std::string("libucp.so.0 lacks ") + name + " (UCX 1.12 or newer is needed)";
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = std::string("libucp.so.0 (UCX) cannot be loaded: ") + (e != nullptr ? e : "not found") +
            "; the network transport between hosts and emulated nodes (WEFT_EMULATE_NODES) need it: install UCX "
            "(Debian/Ubuntu: libucx0) or add its lib folder to LD_LIBRARY_PATH";
    return l;
  }
  UcxApi& a = l.api;
  std::string& w = l.why;
  bool ok = resolve(lib, "ucp_config_read", a.config_read, w) & resolve(lib, "ucp_config_release", a.config_release, w) &
            resolve(lib, "ucp_config_modify", a.config_modify, w) &
            resolve(lib, "ucp_init_version", a.init_version, w) & resolve(lib, "ucp_cleanup", a.cleanup, w) &
            resolve(lib, "ucp_context_query", a.context_query, w) & resolve(lib, "ucp_worker_create", a.worker_create, w) &
            resolve(lib, "ucp_worker_destroy", a.worker_destroy, w) &
            resolve(lib, "ucp_worker_get_address", a.worker_get_address, w) &
            resolve(lib, "ucp_worker_release_address", a.worker_release_address, w) &
            resolve(lib, "ucp_worker_progress", a.worker_progress, w) & resolve(lib, "ucp_worker_fence", a.worker_fence, w) &
            resolve(lib, "ucp_ep_create", a.ep_create, w) & resolve(lib, "ucp_ep_close_nbx", a.ep_close_nbx, w) &
            resolve(lib, "ucp_ep_flush_nbx", a.ep_flush_nbx, w) & resolve(lib, "ucp_mem_map", a.mem_map, w) &
            resolve(lib, "ucp_mem_unmap", a.mem_unmap, w) & resolve(lib, "ucp_rkey_pack", a.rkey_pack, w) &
            resolve(lib, "ucp_rkey_buffer_release", a.rkey_buffer_release, w) &
            resolve(lib, "ucp_ep_rkey_unpack", a.ep_rkey_unpack, w) & resolve(lib, "ucp_rkey_destroy", a.rkey_destroy, w) &
            resolve(lib, "ucp_put_nbx", a.put_nbx, w) & resolve(lib, "ucp_request_check_status", a.request_check_status, w) &
            resolve(lib, "ucp_request_free", a.request_free, w) &
            resolve(lib, "ucs_status_string", a.status_string, w);  // from libucs, libucp's dependency
  a.ep_print_info = reinterpret_cast<decltype(a.ep_print_info)>(dlsym(lib, "ucp_ep_print_info"));
  a.version_string = reinterpret_cast<decltype(a.version_string)>(dlsym(lib, "ucp_get_version_string"));
  a.worker_set_am_recv_handler =
      reinterpret_cast<decltype(a.worker_set_am_recv_handler)>(dlsym(lib, "ucp_worker_set_am_recv_handler"));
  a.am_send_nbx = reinterpret_cast<decltype(a.am_send_nbx)>(dlsym(lib, "ucp_am_send_nbx"));
  a.am_recv_data_nbx = reinterpret_cast<decltype(a.am_recv_data_nbx)>(dlsym(lib, "ucp_am_recv_data_nbx"));
  l.ok = ok;
  if (!ok) dlclose(lib);  // a library without what weft needs stays unloaded
  return l;
}

}  // namespace

const UcxApi* ucx_api(std::string* why) {
  static Loaded loaded = load();
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

std::string ucx_unavailable_reason() {
  std::string why;
  return ucx_api(&why) != nullptr ? std::string() : why;
}
#else
std::string ucx_unavailable_reason() {
  return "this weft was built without UCX's headers, so its network transport (between hosts, and for emulated "
         "nodes) is compiled out: install them (Debian/Ubuntu: libucx-dev) and rebuild";
}
#endif

}  // namespace weft::net
