/* weft's declaration of NCCL's C ABI (libweft_nccl.so, installable as libnccl.so.2).
 *
 * Programs written for NCCL compile against this header (install or copy it as nccl.h)
 * and run on weft without a change; programs built against NVIDIA's header run on weft
 * when libweft_nccl.so is loaded in libnccl.so.2's place (LD_PRELOAD or the library path).
 * Types, enum values and struct layouts are NCCL's, so both directions work. Every
 * function also exists as pnccl<Name> (the profiling alias, as MPI's PMPI).
 *
 * What weft does not do (the device API of nccl_device.h, ncclGroupSimulateEnd, reductions
 * of fp8 types) returns ncclInvalidUsage and a sentence in ncclGetLastError, or goes to a
 * real NCCL named by WEFT_NCCL_FALLBACK. docs/nccl-compat.md has the details.
 */
#ifndef NCCL_H_
#define NCCL_H_
#ifndef WEFT_NCCL_H_
#define WEFT_NCCL_H_

/* NCCL's header brings these in; programs written for it rely on that. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if defined(__cplusplus)
#include <cuda_fp8.h>
#endif
#include <limits.h>
#include <stddef.h>

/* The API level this header declares: NCCL 2.28's host API. The device API that NCCL
 * 2.28 added (nccl_device.h) is not part of weft, and some programs include it whenever
 * the header says 2.28 (nccl-tests 2.19 does); build those with
 * -DWEFT_NCCL_DECLARED_MINOR=27 so that this header declares itself 2.27. */
#ifndef WEFT_NCCL_DECLARED_MINOR
#define WEFT_NCCL_DECLARED_MINOR 28
#endif
#define NCCL_MAJOR 2
#define NCCL_MINOR WEFT_NCCL_DECLARED_MINOR
#define NCCL_PATCH 0
#define NCCL_SUFFIX "weft"
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/** A communicator: one rank of a group of GPUs. */
typedef struct ncclComm* ncclComm_t;
/** A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/** Rendezvous token made by ncclGetUniqueId on one rank and handed to all. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** Result codes, NCCL's values. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6, /**< also a peer lost (its process exited) or one that stopped answering within WEFT_TIMEOUT */
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/** Communicator options (layout of NCCL 2.28, version 22800). Initialize with
 *  NCCL_CONFIG_INITIALIZER; weft reads `blocking`, `commName` and `CTAPolicy` (NCCL_CTA_POLICY
 *  overrides it, as in NCCL), accepts every other field and ignores it (thread blocks are
 *  chosen by weft's selection table). */
typedef struct ncclConfig_v22800 {
  size_t size;          /**< sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;   /**< 0xcafebeef */
  unsigned int version; /**< NCCL_VERSION_CODE of the caller's header */
  int blocking;         /**< 0: calls may return ncclInProgress (weft never does) */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName; /**< shown in weft's log lines */
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                        \
  {                                                                                                    \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,    \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,    \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,    \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                                   \
  }

/** What ncclGroupSimulateEnd fills (weft: not supported). */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/** Reduction operators, NCCL's values. Values from ncclNumOps up are operators made by
 *  ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/** Element types, NCCL's values. weft reduces every type but the two fp8 ones (those go
 *  to WEFT_NCCL_FALLBACK); every type moves (gather, broadcast, all-to-all, send). */
typedef enum {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/** Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,        /**< device memory, read when the collective runs */
  ncclScalarHostImmediate = 1  /**< host memory, read before the call returns */
} ncclScalarResidence_t;

/* ---- Library, errors, memory ---- */

/** Writes the NCCL version weft's ABI matches (NCCL_VERSION(2,28,0) = 22800). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);
/** A static string naming `result`. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/** The message of the last failed call on this thread ("" if none); comm may be NULL. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
/** Device memory usable by every call (cudaMalloc underneath); size 0 gives NULL. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- Communicators ---- */

/** Makes a rendezvous token; the process that calls it hosts the bootstrap root. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);
/** Joins rank `rank` of `nranks` on the current CUDA device; blocks until all ranks are
 *  there (bounded by WEFT_BOOTSTRAP_TIMEOUT). Inside ncclGroupStart/End the join happens
 *  at ncclGroupEnd, all of the group's communicators at once. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/** As ncclCommInitRank with options; config may be NULL. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
/** As ncclCommInitRankConfig; weft's bootstrap has one root, so every rank uses commIds[0]. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);
/** `ndev` ranks in this process, rank i on devlist[i] (devices 0..ndev-1 if NULL). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/** Collective over `comm`: ranks passing the same color form a new communicator, ordered
 *  by key then by rank; NCCL_SPLIT_NOCOLOR gives NULL. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
/** The ranks not in excludeRanksList (which do not call it) form a new communicator, in
 *  parent rank order; config NULL inherits the parent's. Every surviving rank must run on
 *  this host (else ncclInvalidUsage). NCCL_SHRINK_ABORT first stops the parent's work and
 *  leaves it unusable (destroy it). */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);
/** Waits for the communicator's work (bounded by WEFT_TIMEOUT); destroy is then local. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
/** Finalizes (if not done) and frees. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
/** Stops the communicator's kernels at their next wait and frees without meeting peers. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/** Aborts the communicator's work and leaves it unusable but destroyable. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);
/** ncclSuccess, or the error a kernel of the communicator recorded (ncclRemoteError when a
 *  peer stopped answering); details in ncclGetLastError. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/** Registers a buffer with this rank of the communicator (local, as in NCCL: no other rank takes part). */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
/** Collective: every rank registers a window (same flags, same order; NCCL_WIN_COLL_SYMMETRIC:
 *  same size). Inside a group it is registered at ncclGroupEnd and *win written then.
 *  AllGather, AlltoAll and Broadcast whose receive buffers lie in windows run by copy engines
 *  into the peers' windows (docs/nccl-compat.md). Deregistration is local, and refused
 *  (ncclInvalidUsage) while a collective that used the window is in flight. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- Reduction operators ---- */

/** An operator that multiplies each input by *scalar (of `datatype`) before summing; valid
 *  for collectives on `comm` with `datatype`. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives (asynchronous on `stream`; every rank, same order, same arguments) ---- */

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);
/** In-place broadcast (deprecated form of ncclBroadcast). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
/** Rank i's count elements land at recvbuff + i * count on the root. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
/** The root's sendbuff + i * count goes to rank i. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point ---- */

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---- Groups ---- */

/** Starts a group (groups nest; the outermost ncclGroupEnd issues it). */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
/** Issues the group: deferred communicator initializations first, then the sends and
 *  receives of each communicator as one launch. */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/** Not supported by weft (ncclInvalidUsage); `weft simulate` estimates plans instead. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* WEFT_NCCL_H_ */
#endif /* NCCL_H_ */
