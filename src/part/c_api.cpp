// The extern "C" API of include/weft/partitioned.h: each call checks its handles against
// the live ones and turns weft::Error into a weftResult_t (message for weftGetLastError).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "part/context.hpp"
#include "part/request.hpp"
#include "runtime/c_api_internal.hpp"
#include "util/error.hpp"
#include "util/handle_registry.hpp"
#include "util/log.hpp"
#include "weft/partitioned.h"

struct weftPartComm {
  std::unique_ptr<weft::part::Context> impl;
};
struct weftPrequest {
  std::unique_ptr<weft::part::Request> impl;
};
struct weftPdevRequest {
  std::unique_ptr<weft::part::DeviceRequest> impl;
};
struct weftPcoll {
  std::unique_ptr<weft::part::Collective> impl;
};

namespace {

using weft::ErrorCode;
using weft::fail;

weft::HandleRegistry& live() {
  static weft::HandleRegistry* r = new weft::HandleRegistry();  // never destroyed: used until exit
  return *r;
}

template <typename F>
weftResult_t guard(const char* fn, F&& f) noexcept {
  return weft::api_guard(fn, std::forward<F>(f));
}

template <typename H>
auto& get(H* h, const char* what) {
  if (h == nullptr) fail(ErrorCode::InvalidArgument, std::string(what) + " is null");
  if (!live().live(h) || !h->impl) fail(ErrorCode::InvalidArgument, std::string(what) + " was freed, or is not one");
  return *h->impl;
}

template <typename H, typename T>
H* make(std::unique_ptr<T> p) {
  H* h = new H{std::move(p)};
  live().add(h);
  return h;
}

/// Frees what `h` owns; the small handle object stays allocated so its address is never reused.
template <typename H>
void retire(H* h, const char* what) {
  get(h, what);
  live().retire(h);
  h->impl.reset();
}

template <typename T>
void need(T* p, const char* name) {
  if (p == nullptr) fail(ErrorCode::InvalidArgument, std::string(name) + " is null");
}

uint32_t partitions_arg(int n) {
  if (n <= 0) fail(ErrorCode::InvalidArgument, "partitions " + std::to_string(n) + " must be at least 1");
  return static_cast<uint32_t>(n);
}

uint32_t index_arg(int p) {
  // A negative index reads as a huge one, which the request reports as out of range.
  return static_cast<uint32_t>(p);
}

}  // namespace

extern "C" {

weftResult_t weftPartCommCreate(weftComm_t comm, weftPartComm_t* out) {
  return guard("weftPartCommCreate", [&] {
    need(out, "out");
    *out = make<weftPartComm>(weft::part::Context::create(weft::communicator_of(comm)));
  });
}

weftResult_t weftPartCommCreateWithPath(weftComm_t comm, weftPartPath_t path, weftPartComm_t* out) {
  return guard("weftPartCommCreateWithPath", [&] {
    need(out, "out");
    *out = make<weftPartComm>(weft::part::Context::create(weft::communicator_of(comm), static_cast<int>(path)));
  });
}

weftResult_t weftPartCommDestroy(weftPartComm_t pc) {
  return guard("weftPartCommDestroy", [&] { retire(pc, "the partitioned context"); });
}

weftResult_t weftPsendInit(const void* buf, int partitions, size_t count, weftDataType_t datatype, int dest, int tag,
                           weftPartComm_t pc, weftPrequest_t* request) {
  return guard("weftPsendInit", [&] {
    need(request, "request");
    auto& ctx = get(pc, "the partitioned context");
    *request = make<weftPrequest>(ctx.psend_init(buf, partitions_arg(partitions), count, datatype, dest, tag));
  });
}

weftResult_t weftPrecvInit(void* buf, int partitions, size_t count, weftDataType_t datatype, int source, int tag,
                           weftPartComm_t pc, weftPrequest_t* request) {
  return guard("weftPrecvInit", [&] {
    need(request, "request");
    auto& ctx = get(pc, "the partitioned context");
    *request = make<weftPrequest>(ctx.precv_init(buf, partitions_arg(partitions), count, datatype, source, tag));
  });
}

weftResult_t weftPstart(weftPrequest_t r) {
  return guard("weftPstart", [&] { get(r, "the request").start(); });
}

weftResult_t weftPbufPrepare(weftPrequest_t r) {
  return guard("weftPbufPrepare", [&] { get(r, "the request").pbuf_prepare(); });
}

weftResult_t weftPbufPrepareAll(int n, weftPrequest_t* requests) {
  return guard("weftPbufPrepareAll", [&] {
    if (n < 0) fail(ErrorCode::InvalidArgument, "n is negative");
    if (n > 0) need(requests, "requests");
    // Kept between calls (cleared, not freed): no allocation per epoch once it has grown.
    thread_local std::vector<weft::part::Request*> rs;
    rs.clear();
    weft::part::ContextImpl* ctx = nullptr;
    for (int i = 0; i < n; ++i) {
      auto* impl = dynamic_cast<weft::part::RequestImpl*>(&get(requests[i], "a request"));
      if (ctx != nullptr && &impl->ctx() != ctx)
        fail(ErrorCode::InvalidArgument, "the requests belong to different partitioned contexts");
      ctx = &impl->ctx();
      rs.push_back(impl);
    }
    if (ctx) ctx->pbuf_prepare_all(rs);
  });
}

weftResult_t weftPready(int partition, weftPrequest_t r) {
  return guard("weftPready", [&] { get(r, "the request").pready(index_arg(partition)); });
}

weftResult_t weftParrived(weftPrequest_t r, int partition, int* flag) {
  return guard("weftParrived", [&] {
    need(flag, "flag");
    *flag = get(r, "the request").parrived(index_arg(partition)) ? 1 : 0;
  });
}

weftResult_t weftPwait(weftPrequest_t r) {
  return guard("weftPwait", [&] { get(r, "the request").wait(); });
}

weftResult_t weftPtest(weftPrequest_t r, int* flag) {
  return guard("weftPtest", [&] {
    need(flag, "flag");
    *flag = get(r, "the request").test() ? 1 : 0;
  });
}

weftResult_t weftPrequestFree(weftPrequest_t r) {
  return guard("weftPrequestFree", [&] {
    dynamic_cast<weft::part::RequestImpl&>(get(r, "the request")).check_free();
    retire(r, "the request");
  });
}

weftResult_t weftPdevRequestCreate(weftPrequest_t r, int threshold, weftPdevRequest_t* out, const void** dh) {
  return guard("weftPdevRequestCreate", [&] {
    need(out, "out");
    if (threshold <= 0) fail(ErrorCode::InvalidArgument, "threshold " + std::to_string(threshold) + " must be at least 1");
    auto d = get(r, "the request").device_request_create(static_cast<uint32_t>(threshold));
    const void* p = d->device_pointer();
    *out = make<weftPdevRequest>(std::move(d));
    if (dh) *dh = p;
  });
}

weftResult_t weftPdevRequestFree(weftPdevRequest_t d) {
  return guard("weftPdevRequestFree", [&] { retire(d, "the device request"); });
}

weftResult_t weftPrecvDeviceHandle(weftPrequest_t r, void* out, size_t bytes) {
  return guard("weftPrecvDeviceHandle", [&] {
    need(out, "out");
    if (bytes != sizeof(weft::part::PrecvDeviceHandle))
      fail(ErrorCode::InvalidArgument, "bytes " + std::to_string(bytes) + " is not sizeof(PrecvDeviceHandle) = " +
                                           std::to_string(sizeof(weft::part::PrecvDeviceHandle)));
    weft::part::PrecvDeviceHandle h = get(r, "the request").recv_handle();
    std::memcpy(out, &h, sizeof(h));
  });
}

weftResult_t weftPallreduceInit(void* buf, int partitions, size_t count, weftDataType_t datatype, weftRedOp_t op,
                                int tag, weftPartComm_t pc, weftPcoll_t* coll) {
  return guard("weftPallreduceInit", [&] {
    need(coll, "coll");
    auto& ctx = get(pc, "the partitioned context");
    *coll = make<weftPcoll>(ctx.pallreduce_init(buf, partitions_arg(partitions), count, datatype, op, tag));
  });
}

weftResult_t weftPbcastInit(void* buf, int partitions, size_t count, weftDataType_t datatype, int root, int tag,
                            weftPartComm_t pc, weftPcoll_t* coll) {
  return guard("weftPbcastInit", [&] {
    need(coll, "coll");
    auto& ctx = get(pc, "the partitioned context");
    *coll = make<weftPcoll>(ctx.pbcast_init(buf, partitions_arg(partitions), count, datatype, root, tag));
  });
}

weftResult_t weftPcollStart(weftPcoll_t c) {
  return guard("weftPcollStart", [&] { get(c, "the collective").start(); });
}
weftResult_t weftPcollPbufPrepare(weftPcoll_t c) {
  return guard("weftPcollPbufPrepare", [&] { get(c, "the collective").pbuf_prepare(); });
}
weftResult_t weftPcollWait(weftPcoll_t c) {
  return guard("weftPcollWait", [&] { get(c, "the collective").wait(); });
}
weftResult_t weftPcollTest(weftPcoll_t c, int* flag) {
  return guard("weftPcollTest", [&] {
    need(flag, "flag");
    *flag = get(c, "the collective").test() ? 1 : 0;
  });
}
weftResult_t weftPcollParrived(weftPcoll_t c, int partition, int* flag) {
  return guard("weftPcollParrived", [&] {
    need(flag, "flag");
    *flag = get(c, "the collective").parrived(index_arg(partition)) ? 1 : 0;
  });
}
weftResult_t weftPcollDeviceHandle(weftPcoll_t c, const void** dh) {
  return guard("weftPcollDeviceHandle", [&] {
    need(dh, "deviceHandle");
    *dh = get(c, "the collective").device_pointer();
  });
}
weftResult_t weftPcollFree(weftPcoll_t c) {
  return guard("weftPcollFree", [&] { retire(c, "the collective"); });
}

}  // extern "C"
