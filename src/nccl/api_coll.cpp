// NCCL's collectives, point-to-point calls, groups and PreMulSum operators (see
// include/weft/nccl.h). Each call is routed (route.hpp): to weft, to weft after a local
// pre-multiplication, or to the fallback NCCL.
#include <cuda_runtime_api.h>

#include <cstring>

#include "nccl/comm.hpp"
#include "nccl/fallback.hpp"
#include "nccl/group.hpp"
#include "nccl/guard.hpp"
#include "nccl/premul.hpp"
#include "nccl/route.hpp"
#include "util/cuda_check.hpp"
#include "util/checked.hpp"

using namespace weft::nccl;
using weft::ErrorCode;
using weft::fail;

namespace {

weftDataType_t wt(int t) { return static_cast<weftDataType_t>(t); }
weftRedOp_t wo(int o) { return static_cast<weftRedOp_t>(o); }

// Gather and Scatter as one group of weft sends and receives.
void gather_scatter(bool gather, const void* send, void* recv, size_t count, int type, int root, ncclComm& c,
                    cudaStream_t s) {
  if (root < 0 || root >= c.nranks)
    fail(ErrorCode::InvalidArgument, std::string(gather ? "Gather" : "Scatter") + ": root " + std::to_string(root) +
                                         " is outside 0.." + std::to_string(c.nranks - 1));
  const size_t bytes = weft::checked_mul(count, type_size(type), gather ? "ncclGather: the count times the element size"
                                                                         : "ncclScatter: the count times the element size");
  // The root's buffer holds nranks blocks: its size must not wrap either.
  weft::checked_mul(bytes, static_cast<uint64_t>(c.nranks), gather ? "ncclGather: the receive buffer's size"
                                                                   : "ncclScatter: the send buffer's size");
  check_weft(weftGroupStart());
  weftResult_t first = weftSuccess;
  auto note = [&](weftResult_t r) {
    if (first == weftSuccess) first = r;
  };
  if (count > 0) {
    if (gather) {
      char* r = static_cast<char*>(recv);
      const bool in_place = c.rank == root && send == r + bytes * static_cast<size_t>(root);
      if (!(c.rank == root && in_place)) note(weftSend(send, count, wt(type), root, c.weft, s));
      if (c.rank == root)
        for (int p = 0; p < c.nranks; ++p)
          if (!(p == root && in_place)) note(weftRecv(r + bytes * static_cast<size_t>(p), count, wt(type), p, c.weft, s));
    } else {
      const char* sb = static_cast<const char*>(send);
      const bool in_place = c.rank == root && recv == sb + bytes * static_cast<size_t>(root);
      if (c.rank == root)
        for (int p = 0; p < c.nranks; ++p)
          if (!(p == root && in_place)) note(weftSend(sb + bytes * static_cast<size_t>(p), count, wt(type), p, c.weft, s));
      if (!(c.rank == root && in_place)) note(weftRecv(recv, count, wt(type), root, c.weft, s));
    }
  }
  weftResult_t end = weftGroupEnd();
  if (first == weftSuccess) first = end;
  check_weft(first);
}

void run_weft(Coll k, const void* send, void* recv, size_t count, int type, int op, int root, ncclComm& c,
              cudaStream_t s) {
  switch (k) {
    case Coll::AllReduce: return check_weft(weftAllReduce(send, recv, count, wt(type), wo(op), c.weft, s));
    case Coll::Broadcast: return check_weft(weftBroadcast(send, recv, count, wt(type), root, c.weft, s));
    case Coll::Reduce: return check_weft(weftReduce(send, recv, count, wt(type), wo(op), root, c.weft, s));
    case Coll::AllGather: return check_weft(weftAllGather(send, recv, count, wt(type), c.weft, s));
    case Coll::ReduceScatter: return check_weft(weftReduceScatter(send, recv, count, wt(type), wo(op), c.weft, s));
    case Coll::AllToAll: return check_weft(weftAllToAll(send, recv, count, wt(type), c.weft, s));
    case Coll::Gather: return gather_scatter(true, send, recv, count, type, root, c, s);
    case Coll::Scatter: return gather_scatter(false, send, recv, count, type, root, c, s);
    case Coll::Send: return check_weft(weftSend(send, count, wt(type), root, c.weft, s));
    case Coll::Recv: return check_weft(weftRecv(recv, count, wt(type), root, c.weft, s));
  }
}

// PreMulSum: scale locally (into the output, or a stream-ordered temporary when the
// output cannot hold the input), then sum with weft.
void run_premul(Coll k, const void* send, void* recv, size_t count, int type, int root, const PreMulOp& op,
                ncclComm& c, cudaStream_t s) {
  if (count == 0) return run_weft(k, send, recv, count, type, 0, root, c, s);
  weft::DeviceGuard g(c.device);
  const void* dev = op.on_device ? op.device_scalar : nullptr;
  if (k == Coll::AllReduce) {
    launch_premul(recv, send, count, type, dev, op.host_scalar, s);
    return run_weft(k, recv, recv, count, type, 0, root, c, s);
  }
  const size_t n = k == Coll::ReduceScatter
                       ? weft::checked_mul(count, static_cast<uint64_t>(c.nranks), "ncclReduceScatter: the send count")
                       : count;
  void* tmp = nullptr;
  WEFT_CUDA_CHECK(cudaMallocAsync(&tmp, weft::checked_mul(n, type_size(type), "PreMulSum: the count times the element size"), s));
  try {
    launch_premul(tmp, send, n, type, dev, op.host_scalar, s);
    run_weft(k, tmp, recv, count, type, 0, root, c, s);
  } catch (...) {
    cudaFreeAsync(tmp, s);
    throw;
  }
  WEFT_CUDA_CHECK(cudaFreeAsync(tmp, s));
}

void run_fallback(Coll k, const void* send, void* recv, size_t count, int type, int op, int root, PreMulOp* pm,
                  const std::string& kind, ncclComm& c, cudaStream_t s) {
  std::string why;
  void* rc = ensure_real_comm(c, kind);
  const RealNccl* real = real_nccl(&why);
  note_forwarded(kind);
  const bool grouped = enter_real_group(*real, rc);
  // Non-blocking fallback communicator: inside a group ncclInProgress is settled at
  // ncclGroupEnd; alone, the call is waited out here (bounded).
  auto settle = [&](int res, const char* call) {
    if (grouped && res == ncclInProgress) return;
    finish_real(*real, res, call, &rc, 1);
  };
  int real_op = op;
  if (pm != nullptr) {
    if (pm->real_op < 0) {
      void* scalar = pm->on_device ? const_cast<void*>(pm->device_scalar) : static_cast<void*>(pm->host_scalar);
      settle(real->RedOpCreatePreMulSum(&pm->real_op, scalar, type, pm->on_device ? 0 : 1, rc),
             "ncclRedOpCreatePreMulSum");
    }
    real_op = pm->real_op;
  }
  switch (k) {
    case Coll::AllReduce:
      return settle(real->AllReduce(send, recv, count, type, real_op, rc, s), "ncclAllReduce");
    case Coll::Reduce:
      return settle(real->Reduce(send, recv, count, type, real_op, root, rc, s), "ncclReduce");
    case Coll::ReduceScatter:
      return settle(real->ReduceScatter(send, recv, count, type, real_op, rc, s), "ncclReduceScatter");
    default: fail(ErrorCode::Internal, std::string("no fallback path for ") + coll_name(k));
  }
}

void run(Coll k, const void* send, void* recv, size_t count, int type, int op, int root, ncclComm_t comm,
         cudaStream_t s, const char* where) {
  ncclComm& c = usable(comm, where);
  std::lock_guard<std::recursive_mutex> lock(c.mu);
  PreMulOp* pm = nullptr;
  if (reduces(k) && op >= kFirstUserOp) {
    auto it = c.ops.find(op);
    if (it != c.ops.end()) pm = &it->second;
  }
  Route r = route(k, type, op, pm ? pm->type : -1);
  c.last_stream = s;
  c.used = true;
  switch (r.kind) {
    case Route::Kind::Weft: return run_weft(k, send, recv, count, r.weft_type, r.weft_op, root, c, s);
    case Route::Kind::PreMulSum: return run_premul(k, send, recv, count, r.weft_type, root, *pm, c, s);
    case Route::Kind::Fallback: return run_fallback(k, send, recv, count, type, op, root, pm, r.fallback_kind, c, s);
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclAllReduce",
               [&] { run(Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream, "ncclAllReduce"); });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclReduce",
               [&] { run(Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduce"); });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclReduceScatter", [&] {
    run(Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream, "ncclReduceScatter");
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclBroadcast", [&] {
    run(Coll::Broadcast, sendbuff, recvbuff, count, datatype, 0, root, comm, stream, "ncclBroadcast");
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return guard("ncclBcast",
               [&] { run(Coll::Broadcast, buff, buff, count, datatype, 0, root, comm, stream, "ncclBcast"); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclAllGather", [&] {
    run(Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0, comm, stream, "ncclAllGather");
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclAlltoAll",
               [&] { run(Coll::AllToAll, sendbuff, recvbuff, count, datatype, 0, 0, comm, stream, "ncclAlltoAll"); });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclGather",
               [&] { run(Coll::Gather, sendbuff, recvbuff, count, datatype, 0, root, comm, stream, "ncclGather"); });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclScatter",
               [&] { run(Coll::Scatter, sendbuff, recvbuff, count, datatype, 0, root, comm, stream, "ncclScatter"); });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return guard("ncclSend",
               [&] { run(Coll::Send, sendbuff, nullptr, count, datatype, 0, peer, comm, stream, "ncclSend"); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return guard("ncclRecv",
               [&] { run(Coll::Recv, nullptr, recvbuff, count, datatype, 0, peer, comm, stream, "ncclRecv"); });
}

ncclResult_t ncclGroupStart(void) {
  return guard("ncclGroupStart", [&] { group_start(); });
}

ncclResult_t ncclGroupEnd(void) {
  return guard("ncclGroupEnd", [&] { group_end(); });
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guard("ncclGroupSimulateEnd", [&] {
    (void)simInfo;
    unsupported("weft does not simulate groups (use `weft simulate` on a plan); end the group with ncclGroupEnd");
  });
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return guard("ncclRedOpCreatePreMulSum", [&] {
    need(op, "op");
    need(scalar, "scalar");
    ncclComm& c = usable(comm, "ncclRedOpCreatePreMulSum");
    const size_t esz = type_size(datatype);
    if (esz == 0) fail(ErrorCode::InvalidArgument, "unknown data type " + std::to_string(datatype));
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
      fail(ErrorCode::InvalidArgument, "residence " + std::to_string(residence) +
                                           " is neither ncclScalarDevice nor ncclScalarHostImmediate");
    std::lock_guard<std::recursive_mutex> lock(c.mu);
    if (c.next_op >= ncclMaxRedOp) fail(ErrorCode::InvalidUsage, "too many reduction operators on this communicator");
    PreMulOp p;
    p.type = datatype;
    p.on_device = residence == ncclScalarDevice;
    if (p.on_device)
      p.device_scalar = scalar;
    else
      std::memcpy(p.host_scalar, scalar, esz);
    const int id = c.next_op++;
    c.ops[id] = p;
    *op = static_cast<ncclRedOp_t>(id);
  });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guard("ncclRedOpDestroy", [&] {
    ncclComm& c = known(comm, "ncclRedOpDestroy");
    std::lock_guard<std::recursive_mutex> lock(c.mu);
    if (op < ncclNumOps) fail(ErrorCode::InvalidArgument, "operator " + std::to_string(op) + " is built in");
    auto it = c.ops.find(op);
    if (it == c.ops.end())
      fail(ErrorCode::InvalidArgument, "operator " + std::to_string(op) + " was not made on this communicator");
    if (it->second.real_op >= 0 && c.real != nullptr)
      if (const RealNccl* real = real_nccl(nullptr)) real->RedOpDestroy(it->second.real_op, c.real);
    c.ops.erase(it);
  });
}

}  // extern "C"

WEFT_NCCL_ALIAS(ncclAllReduce)
WEFT_NCCL_ALIAS(ncclReduce)
WEFT_NCCL_ALIAS(ncclReduceScatter)
WEFT_NCCL_ALIAS(ncclBroadcast)
WEFT_NCCL_ALIAS(ncclBcast)
WEFT_NCCL_ALIAS(ncclAllGather)
WEFT_NCCL_ALIAS(ncclAlltoAll)
WEFT_NCCL_ALIAS(ncclGather)
WEFT_NCCL_ALIAS(ncclScatter)
WEFT_NCCL_ALIAS(ncclSend)
WEFT_NCCL_ALIAS(ncclRecv)
WEFT_NCCL_ALIAS(ncclGroupStart)
WEFT_NCCL_ALIAS(ncclGroupEnd)
WEFT_NCCL_ALIAS(ncclGroupSimulateEnd)
WEFT_NCCL_ALIAS(ncclRedOpCreatePreMulSum)
WEFT_NCCL_ALIAS(ncclRedOpDestroy)
