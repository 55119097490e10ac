/* weft: the C API.
 *
 * A collective communication library for GPUs. The calls, types and enum values follow
 * NCCL's, so that an NCCL-compatible library maps onto these one to one:
 *
 *   weftUniqueId id;  if (rank == 0) weftGetUniqueId(&id);  (share id with every rank)
 *   weftComm_t comm;  weftCommInitRank(&comm, nranks, id, rank);
 *   weftAllReduce(sendbuf, recvbuf, count, weftFloat32, weftSum, comm, stream);
 *   weftCommDestroy(comm);
 *
 * Every call returns a weftResult_t; weftGetLastError() returns the message of the last
 * failure on the calling thread (what failed and where: rank, peer, thread block, slot).
 * Collectives are asynchronous on `stream` and capturable in CUDA graphs. A peer whose
 * process exits surfaces as weftRemoteError within a second; a live peer that stops
 * answering as weftTimeout after WEFT_TIMEOUT seconds (default 600; 0: no deadline); either
 * from weftCommGetAsyncError or from the next call on the communicator.
 * docs/c-api.md documents each call.
 */
#ifndef WEFT_WEFT_H_
#define WEFT_WEFT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
/** The value weftGetVersion() returns: major * 10000 + minor * 100 + patch. */
#define WEFT_VERSION_CODE (WEFT_MAJOR * 10000 + WEFT_MINOR * 100 + WEFT_PATCH)

/** Result codes; 0 to 7 have NCCL's values. */
typedef enum {
  weftSuccess = 0,
  weftUnhandledCudaError = 1, /**< a CUDA call failed */
  weftSystemError = 2,        /**< an OS call failed (socket, thread, file) */
  weftInternalError = 3,      /**< a bug in weft */
  weftInvalidArgument = 4,    /**< a bad value was passed */
  weftInvalidUsage = 5,       /**< a call not allowed in this state, or unsupported */
  weftRemoteError = 6,        /**< a peer failed, vanished, or disagrees (version, size) */
  weftInProgress = 7,         /**< an asynchronous operation has not finished */
  weftTimeout = 8,            /**< a bounded wait ran out (host or device) */
  weftParseError = 9,         /**< an input file is malformed */
  weftVerifyError = 10,       /**< an algorithm or plan fails verification */
  weftNumResults = 11
} weftResult_t;

/** Element types; values as NCCL's. */
typedef enum {
  weftInt8 = 0, weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2, weftInt = 2,
  weftUint32 = 3,
  weftInt64 = 4,
  weftUint64 = 5,
  weftFloat16 = 6, weftHalf = 6,
  weftFloat32 = 7, weftFloat = 7,
  weftFloat64 = 8, weftDouble = 8,
  weftBfloat16 = 9,
  weftNumTypes = 10
} weftDataType_t;

/** Reduction operators; values as NCCL's. fp16 and bf16 are reduced in fp32. weftAvg
 *  divides the sum by the number of ranks (integer division for integer types). */
typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMax = 2,
  weftMin = 3,
  weftAvg = 4,
  weftNumOps = 5
} weftRedOp_t;

#define WEFT_UNIQUE_ID_BYTES 128
/** Opaque rendezvous token: the bootstrap root's address and a random magic. Create it
 *  on one rank with weftGetUniqueId and hand the same bytes to every rank. */
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

typedef struct weftComm* weftComm_t;

/** A CUDA stream (cudaStream_t), declared here so that this header needs no CUDA header. */
typedef struct CUstream_st* weftStream_t;

/** Writes WEFT_VERSION_CODE of the loaded library to *version. */
weftResult_t weftGetVersion(int* version);

/** Creates a rendezvous token and starts, in the calling process, the bootstrap root
 *  that waits (WEFT_BOOTSTRAP_TIMEOUT seconds) for the ranks of one communicator. */
weftResult_t weftGetUniqueId(weftUniqueId* uniqueId);

/** Creates rank `rank` of a communicator of `nranks` ranks on the current CUDA device.
 *  Blocks until every rank has joined; a rank that does not join within
 *  WEFT_BOOTSTRAP_TIMEOUT seconds, or runs another weft version, is an error that names it. */
weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank);

/** Creates `ndev` communicators of one process, rank i on device devlist[i] (devices
 *  0..ndev-1 when devlist is NULL). */
weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist);

/** Creates a communicator from the launcher's environment: mpirun (OMPI_COMM_WORLD_RANK,
 *  OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK; PMI_RANK, PMI_SIZE) or torchrun
 *  (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Selects device LOCAL_RANK
 *  modulo the device count. The rendezvous address comes from WEFT_BOOTSTRAP_ADDR, else
 *  MASTER_ADDR:MASTER_PORT, else a file under WEFT_BOOTSTRAP_DIR named after the job. */
weftResult_t weftCommInitFromEnv(weftComm_t* comm);

/** Waits for the communicator's work to finish (bounded by WEFT_TIMEOUT, or a lost peer),
 *  meets the other ranks (at most 60 s) and frees it; memory peers may still write into is
 *  freed once they cannot. Using the handle again afterwards (destroying it again included)
 *  is weftInvalidArgument. */
weftResult_t weftCommDestroy(weftComm_t comm);

/** Stops the communicator's kernels at their next wait, closes its bootstrap connections (the
 *  peers notice at once) and frees it without waiting for peers (memory they may still write
 *  into once they cannot). */
weftResult_t weftCommAbort(weftComm_t comm);

weftResult_t weftCommCount(const weftComm_t comm, int* count);
weftResult_t weftCommCuDevice(const weftComm_t comm, int* device);
weftResult_t weftCommUserRank(const weftComm_t comm, int* rank);

/** Writes weftSuccess, or the communicator's error (weftTimeout when a peer stopped
 *  answering, weftRemoteError when a peer was lost), to *asyncError. */
weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError);

/** A static string naming the result code. */
const char* weftGetErrorString(weftResult_t result);

/** The message of the last failed call on this thread ("" if none); valid until the next
 *  failing call on this thread. The comm argument is accepted for NCCL's signature and may be NULL. */
const char* weftGetLastError(weftComm_t comm);

/* Collectives. Every rank calls each collective in the same order with the same count,
 * type and op. In place when sendbuff == recvbuff (AllGather: sendbuff == recvbuff +
 * rank * sendcount; ReduceScatter: recvbuff == sendbuff + rank * recvcount). Counts may
 * be 0 (nothing happens) and need not divide by anything. */
weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                           weftRedOp_t op, weftComm_t comm, weftStream_t stream);
weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, weftDataType_t datatype,
                           weftComm_t comm, weftStream_t stream);
weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, weftDataType_t datatype,
                               weftRedOp_t op, weftComm_t comm, weftStream_t stream);
weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                           weftComm_t comm, weftStream_t stream);
/** The result lands in recvbuff of `root` only (recvbuff of other ranks is not touched). */
weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, weftRedOp_t op,
                        int root, weftComm_t comm, weftStream_t stream);
/** Rank r sends block p (count elements at sendbuff + p * count) to rank p, which stores
 *  it as its block r of recvbuff. */
weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                          weftComm_t comm, weftStream_t stream);

/* Point to point. Sends and receives between one pair of ranks match in call order and
 * must agree on count and type. Inside weftGroupStart/weftGroupEnd they are issued
 * together as one launch per communicator, which is what avoids deadlock when two ranks
 * send to each other. */
weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftStream_t stream);
weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftStream_t stream);
weftResult_t weftGroupStart(void);
weftResult_t weftGroupEnd(void);

/** Registers a user buffer (device memory of this process) with this rank of the
 *  communicator; local, as ncclCommRegister is: no other rank takes part. *handle
 *  identifies it for weftCommDeregister. */
weftResult_t weftCommRegister(const weftComm_t comm, void* buff, size_t size, void** handle);
weftResult_t weftCommDeregister(const weftComm_t comm, void* handle);

/** Memory windows (NCCL 2.28's ncclCommWindowRegister). Flags, NCCL's values: with
 *  WEFT_WIN_COLL_SYMMETRIC every rank registers the same size and passes its collectives'
 *  buffers at the same offset in its window; WEFT_WIN_DEFAULT allows any offset. */
#define WEFT_WIN_DEFAULT 0x00
#define WEFT_WIN_COLL_SYMMETRIC 0x01
typedef struct weftWindow* weftWindow_t;

/** Collective: every rank of `comm` registers its buffer [buff, buff + size) (device memory
 *  of this process: weftMemAlloc or cudaMalloc), in the same order as the others and with
 *  the same flags. The peers map it through CUDA IPC where they can; then AllGather,
 *  AllToAll and Broadcast whose receive buffers lie in windows on every rank run by copy
 *  engines straight into the peers' windows (docs/c-api.md). One rank's bad arguments, or
 *  ranks that disagree, fail every rank with an error naming the rank; nothing is
 *  registered then. */
weftResult_t weftCommWindowRegister(weftComm_t comm, void* buff, size_t size, weftWindow_t* win, int winFlags);
/** Local: forgets the window. weftInvalidUsage while a collective that used it (on any
 *  stream) has not completed; wait for the stream, then deregister. NULL: nothing. */
weftResult_t weftCommWindowDeregister(weftComm_t comm, weftWindow_t win);

/** CTA (thread block) policies, NCCL's values: DEFAULT the fastest choice; EFFICIENCY at most
 *  16 thread blocks per rank; ZERO AllGather, AllToAll and Broadcast by copy engines (no
 *  thread block moves data) where their buffers are windows or registered. */
#define WEFT_CTA_POLICY_DEFAULT 0x00
#define WEFT_CTA_POLICY_EFFICIENCY 0x01
#define WEFT_CTA_POLICY_ZERO 0x02
/** Collective: every rank passes the same policy (flags 0 to 3; ZERO wins over EFFICIENCY),
 *  else every rank fails naming the ranks. The initial policy is WEFT_CTA_POLICY's. */
weftResult_t weftCommSetCtaPolicy(weftComm_t comm, int policy);
weftResult_t weftCommGetCtaPolicy(weftComm_t comm, int* policy);

/** A memory channel between this rank and one peer, for users' own kernels: the host half
 *  of weft::device::MemoryChannelDeviceHandle (include/weft/device/memory_channel.hpp;
 *  include/weft/channel.hpp wraps these calls for C++; docs/device-api.md). */
typedef struct weftMemoryChannel* weftMemoryChannel_t;

/** Collective: every rank of `comm` calls it together (it all-gathers over the bootstrap),
 *  each with its own list of `npeers` peers (0 or more other ranks, none twice) and its own
 *  buffer [buff, buff + size), device memory of this process (weftMemAlloc). Fills
 *  channels[i] for peers[i]: put/get reach the buffer peers[i] passed, signal/wait pair with
 *  peers[i]'s channel to this rank, and with packetBytes > 0 (every rank the same) each
 *  direction gets an LL packet buffer of packetBytes (rounded up to 16). If any rank's
 *  arguments are refused, every rank fails and no channel is made. */
weftResult_t weftCommConnectMemoryChannels(weftComm_t comm, const int* peers, int npeers, void* buff, size_t size,
                                           size_t packetBytes, weftMemoryChannel_t* channels);
/** Copies the channel's device handle to *handle; `size` must be
 *  sizeof(weft::device::MemoryChannelDeviceHandle) (a check against a header of another version). */
weftResult_t weftMemoryChannelGetDeviceHandle(weftMemoryChannel_t channel, void* handle, size_t size);
/** Releases the channel; the memory its call made is freed, and the peers' memory
 *  unmapped, with the last channel of that call. Every kernel using it, on either side,
 *  must have ended. */
weftResult_t weftMemoryChannelDestroy(weftMemoryChannel_t channel);

/** Device memory suitable for registration and CUDA IPC (cudaMalloc underneath). */
weftResult_t weftMemAlloc(void** ptr, size_t size);
weftResult_t weftMemFree(void* ptr);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* WEFT_WEFT_H_ */
