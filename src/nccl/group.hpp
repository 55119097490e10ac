// NCCL's group semantics on top of weft's: groups nest per thread; inside one,
// ncclCommInitRank is deferred to the outermost ncclGroupEnd (so one thread can create
// several ranks, as nccl-tests -g does), sends and receives are issued together by weft,
// and calls forwarded to the fallback NCCL are bracketed by its own group.
#pragma once

#include "nccl/comm.hpp"
#include "nccl/fallback.hpp"

namespace weft::nccl {

/// True between ncclGroupStart and its matching ncclGroupEnd on this thread.
bool in_group();
void group_start();
/// Ends one level; the outermost runs the deferred initializations (in parallel, one thread
/// per communicator), then the deferred window registrations, then weft's sends and
/// receives, then the fallback's group. The first error is thrown after every part has run.
void group_end();

/// Records an initialization for the outermost ncclGroupEnd.
void defer_init(ncclComm* c, int nranks, const ncclUniqueId& id, int rank, int device);

/// Records a window registration (ncclCommWindowRegister inside a group) for the outermost
/// ncclGroupEnd, which runs them after the deferred initializations: each communicator's in
/// call order, different communicators at the same time (one thread each), so that one
/// thread can register the windows of several ranks, as nccl-tests does. *win is written then.
void defer_window(ncclComm* c, void* buff, size_t size, ncclWindow_t* win, int flags);

/// Cancels `c`'s deferred initialization, if any (it is being freed); safe from any thread.
void forget_deferred(ncclComm* c);

/// Called before a call on the fallback's communicator `comm` is forwarded: inside a group,
/// opens the fallback's group once (so its calls are issued at ncclGroupEnd as well) and
/// records `comm`, whose completion ncclGroupEnd then waits for. Returns whether a group is
/// open (the forwarded call may then answer ncclInProgress).
bool enter_real_group(const RealNccl& real, void* comm);

}  // namespace weft::nccl
