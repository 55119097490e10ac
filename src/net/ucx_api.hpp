// UCX's UCP functions that weft uses, resolved from libucp.so.0 at run time (dlopen), so
// that libweft starts and runs within a host without UCX installed. Only the network
// transport (net/ucx_transport.cpp) includes this header; it needs UCX's headers at build
// time (Debian: libucx-dev) for the types and constants, never the library at link time.
#pragma once

#include <string>

#if WEFT_HAVE_UCX
#include <ucp/api/ucp.h>

namespace weft::net {

struct UcxApi {
  decltype(&::ucp_config_read) config_read;
  decltype(&::ucp_config_release) config_release;
  decltype(&::ucp_config_modify) config_modify;
  decltype(&::ucp_init_version) init_version;
  decltype(&::ucp_cleanup) cleanup;
  decltype(&::ucp_context_query) context_query;
  decltype(&::ucp_worker_create) worker_create;
  decltype(&::ucp_worker_destroy) worker_destroy;
  decltype(&::ucp_worker_get_address) worker_get_address;
  decltype(&::ucp_worker_release_address) worker_release_address;
  decltype(&::ucp_worker_progress) worker_progress;
  decltype(&::ucp_worker_fence) worker_fence;
  decltype(&::ucp_ep_create) ep_create;
  decltype(&::ucp_ep_close_nbx) ep_close_nbx;
  decltype(&::ucp_ep_flush_nbx) ep_flush_nbx;
  decltype(&::ucp_mem_map) mem_map;
  decltype(&::ucp_mem_unmap) mem_unmap;
  decltype(&::ucp_rkey_pack) rkey_pack;
  decltype(&::ucp_rkey_buffer_release) rkey_buffer_release;
  decltype(&::ucp_ep_rkey_unpack) ep_rkey_unpack;
  decltype(&::ucp_rkey_destroy) rkey_destroy;
  decltype(&::ucp_put_nbx) put_nbx;
  decltype(&::ucp_request_check_status) request_check_status;
  decltype(&::ucp_request_free) request_free;
  decltype(&::ucs_status_string) status_string;
  // Optional (null where absent): diagnostics only.
  decltype(&::ucp_ep_print_info) ep_print_info;
  decltype(&::ucp_get_version_string) version_string;
  // Optional: the active-message mode (WEFT_NET_PROTO=am) needs all three.
  decltype(&::ucp_worker_set_am_recv_handler) worker_set_am_recv_handler;
  decltype(&::ucp_am_send_nbx) am_send_nbx;
  decltype(&::ucp_am_recv_data_nbx) am_recv_data_nbx;
  bool has_am() const { return worker_set_am_recv_handler && am_send_nbx && am_recv_data_nbx; }
};

/// The loaded API, or null with `why` set (library absent or a symbol missing).
const UcxApi* ucx_api(std::string* why);

}  // namespace weft::net
#endif

namespace weft::net {
/// Empty when the network transport can run here; else one sentence saying why not and
/// what to install (UCX headers at build time, libucp.so.0 at run time).
std::string ucx_unavailable_reason();
}  // namespace weft::net
