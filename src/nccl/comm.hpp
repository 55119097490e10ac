// The object behind ncclComm_t: a weft communicator, plus what NCCL's API adds on top of
// it (deferred initialization inside groups, PreMulSum operators, the fallback NCCL's
// communicator and the unique id that creates it, a private stream for internal exchanges).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nccl/config.hpp"
#include "util/error.hpp"
#include "util/handle_registry.hpp"
#include "weft/nccl.h"
#include "weft/weft.h"

namespace weft::nccl {

/// An operator made by ncclRedOpCreatePreMulSum.
struct PreMulOp {
  int type = 0;                  ///< the ncclDataType_t it was made for
  bool on_device = false;        ///< ncclScalarDevice: read *device_scalar when the collective runs
  const void* device_scalar = nullptr;
  unsigned char host_scalar[8] = {};  ///< ncclScalarHostImmediate: the value, copied at creation
  int real_op = -1;              ///< the same operator in the fallback NCCL, once made there
};

/// Every ncclComm made and not yet released (see util/handle_registry.hpp).
weft::HandleRegistry& live_comms();

}  // namespace weft::nccl

struct ncclComm {
  ncclComm() { weft::nccl::live_comms().add(this); }

  static constexpr uint64_t kAlive = 0x6d6d6f632d746677ULL;  // "wft-comm"
  enum class State { Pending, Ready, Failed, Finalized, Revoked };

  uint64_t magic = kAlive;
  /// Atomic: a deferred initialization moves it on a worker thread of ncclGroupEnd while
  /// another thread may poll ncclCommGetAsyncError.
  std::atomic<State> state{State::Pending};
  weft::ErrorCode failure_code = weft::ErrorCode::Success;
  std::string failure;

  weftComm_t weft = nullptr;
  int rank = -1, nranks = 0, device = -1;
  weft::nccl::CommOptions options;

  /// Unique id of the fallback NCCL's communicator, made by rank 0 at initialization when
  /// WEFT_NCCL_FALLBACK is set and broadcast over weft; the communicator itself is created
  /// at the first call that needs it (every rank makes that call: it is a collective).
  bool fallback_id_valid = false;
  ncclUniqueId fallback_id{};
  void* real = nullptr;

  std::map<int, weft::nccl::PreMulOp> ops;
  int next_op = 5;
  uint64_t shrinks = 0;  ///< ncclCommShrink calls made on it (numbers the leader's messages)

  cudaStream_t last_stream = nullptr;  ///< the stream of the last call, which internal work follows
  bool used = false;
  cudaStream_t internal = nullptr;     ///< for split and id exchanges; made on first need
  std::recursive_mutex mu;
};

namespace weft::nccl {

/// The object behind `c` whatever its state; throws InvalidArgument for NULL, a destroyed
/// handle or a pointer that is no communicator (checked before it is dereferenced).
ncclComm& handle(ncclComm_t c, const char* where);
/// The communicator behind `c` if it can run work; throws InvalidArgument for NULL or a
/// destroyed handle and while a deferred initialization waits for ncclGroupEnd (NCCL's code
/// for a communicator used before its initialization completed), InvalidUsage after
/// finalize/revoke, and the recorded error after a failed initialization.
ncclComm& usable(ncclComm_t c, const char* where);
/// As usable() for queries that also work on a finalized communicator.
ncclComm& known(ncclComm_t c, const char* where);

/// Joins a weft communicator for `c` on `device` and, with WEFT_NCCL_FALLBACK set, shares the
/// fallback's unique id. `eager_fallback` also creates the fallback's communicator now: a
/// thread that drives several ranks (ncclCommInitAll, several inits in one group) could not
/// create them one after the other later. On failure `c` is marked failed and the error
/// rethrown.
void init_comm(ncclComm* c, int nranks, const ncclUniqueId& id, int rank, int device, bool eager_fallback = false);

/// The fallback NCCL's communicator of `c`, created now if needed (collective: every rank
/// reaches the same forwarded call). Throws InvalidUsage naming `kind` when no fallback is
/// available.
void* ensure_real_comm(ncclComm& c, const std::string& kind);

/// Gathers `bytes` bytes from every rank (rank order) over weft on the private stream,
/// after the communicator's earlier work. Blocking.
std::vector<unsigned char> all_gather_bytes(ncclComm& c, const void* mine, size_t bytes);

/// ncclCommSplit (see nccl.h).
void split(ncclComm& parent, int color, int key, ncclComm_t* newcomm, const CommOptions& options);

/// ncclCommShrink (nccl/shrink.cpp): the ranks not in `exclude` (which do not call it) form a
/// new communicator, in parent rank order. The first of them makes its unique id and posts
/// it to the others' mailboxes (runtime/mailbox.cpp), so no excluded rank takes part; every
/// one must run on this host. NCCL_SHRINK_ABORT first stops the parent's kernels and leaves
/// it unusable (destroy it).
void shrink(ncclComm& parent, const int* exclude, int count, ncclComm_t* newcomm, const CommOptions& options,
            int flags);

/// The ranks that stay after excluding `exclude` (NCCL's checks: count > 0, every entry a rank
/// of the parent, none twice, `me` not among them); InvalidArgument otherwise.
std::vector<int> shrink_survivors(int nranks, int me, const int* exclude, int count);

/// ncclCommWindowRegister's work, now or at ncclGroupEnd: registers the window with weft
/// (collective) and writes its handle to *win.
void register_window(ncclComm& c, void* buff, size_t size, ncclWindow_t* win, int flags);

/// Waits for the communicator's work on its last stream (bounded by WEFT_TIMEOUT through
/// weft's kernels) and marks it finalized.
void finalize(ncclComm& c);

/// Frees what `c` owns: destroy meets the other ranks, abort does not. Safe on failed or
/// pending ones. The small ncclComm object itself stays allocated and marked dead, so that
/// a later use of the same handle is an error, never a use after free.
void release(ncclComm* c, bool abort);

/// Throws weft::Error carrying weft's result and message when `r` is not weftSuccess.
void check_weft(weftResult_t r);

}  // namespace weft::nccl
