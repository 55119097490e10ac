/* weft: partitioned communication, C API (MPI-4 partitioned semantics; paper 002).
 *
 *   weftPartComm_t pc;  weftPartCommCreate(comm, &pc);           (collective, once)
 *   weftPrequest_t s;   weftPsendInit(buf, partitions, count, weftFloat32, peer, tag, pc, &s);
 *   weftPdevRequest_t d; const void* dh;  weftPdevRequestCreate(s, threshold, &d, &dh);
 *   loop: weftPstart(s); weftPbufPrepare(s); kernel<<<...>>>(dh); weftPwait(s);
 *
 * `dh` points to a weft::part::PsendDeviceHandle in device memory (weft/part/device.hpp):
 * a kernel calls pready_thread, pready_warp or pready_block on it. The receiver uses
 * weftPrecvInit, weftPstart, weftPbufPrepare, then weftParrived or a kernel's parrived
 * (weftPrecvDeviceHandle), and weftPwait / weftPtest. Collectives: weftPallreduceInit,
 * weftPbcastInit, then weftPcoll* and a kernel's PcollDeviceHandle::pready_block.
 *
 * Every call returns a weftResult_t and sets weftGetLastError's message on failure; misuse
 * (start while active, pready twice in an epoch, an index out of range, partitions that do
 * not match the peer's) is weftInvalidUsage or weftInvalidArgument, never corruption.
 * These functions live in libweft_part.a, which needs the static libweft.a.
 * docs/partitioned.md documents each call.
 */
#ifndef WEFT_PARTITIONED_H_
#define WEFT_PARTITIONED_H_

#include <stddef.h>

#include "weft/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weftPartComm* weftPartComm_t;
typedef struct weftPrequest* weftPrequest_t;
typedef struct weftPdevRequest* weftPdevRequest_t;
typedef struct weftPcoll* weftPcoll_t;

/** Collective over `comm`'s ranks. The result outlives `comm`; destroy it after every
 *  request made from it is freed on every rank. */
weftResult_t weftPartCommCreate(weftComm_t comm, weftPartComm_t* out);
/** Transfer path of a context's send requests (docs/partitioned.md). */
typedef enum {
  weftPartPathDefault = 0, /**< WEFT_PART_PATH (kernel or proxy; unset: kernel) */
  weftPartPathKernel = 1,  /**< the device pready copies into the receiver's buffer */
  weftPartPathProxy = 2    /**< the device pready marks a host-mapped flag; a progression engine copies */
} weftPartPath_t;
/** weftPartCommCreate with a transfer path for the context's send requests. */
weftResult_t weftPartCommCreateWithPath(weftComm_t comm, weftPartPath_t path, weftPartComm_t* out);
weftResult_t weftPartCommDestroy(weftPartComm_t pc);

weftResult_t weftPsendInit(const void* buf, int partitions, size_t count, weftDataType_t datatype, int dest, int tag,
                           weftPartComm_t pc, weftPrequest_t* request);
weftResult_t weftPrecvInit(void* buf, int partitions, size_t count, weftDataType_t datatype, int source, int tag,
                           weftPartComm_t pc, weftPrequest_t* request);
weftResult_t weftPstart(weftPrequest_t request);
/** First call: sets the pair up; later: ready-to-receive only. */
weftResult_t weftPbufPrepare(weftPrequest_t request);
/** pbuf_prepare of `n` requests together (no deadlock between two ranks that both send). */
weftResult_t weftPbufPrepareAll(int n, weftPrequest_t* requests);
weftResult_t weftPready(int partition, weftPrequest_t request);
weftResult_t weftParrived(weftPrequest_t request, int partition, int* flag);
weftResult_t weftPwait(weftPrequest_t request);
weftResult_t weftPtest(weftPrequest_t request, int* flag);
weftResult_t weftPrequestFree(weftPrequest_t request);

/** A send request's device request: `threshold` user partitions per transport partition.
 *  *deviceHandle: a const weft::part::PsendDeviceHandle* in device memory. */
weftResult_t weftPdevRequestCreate(weftPrequest_t request, int threshold, weftPdevRequest_t* out,
                                   const void** deviceHandle);
weftResult_t weftPdevRequestFree(weftPdevRequest_t dreq);
/** Copies a receive request's weft::part::PrecvDeviceHandle (`bytes` must be its size) to `out`. */
weftResult_t weftPrecvDeviceHandle(weftPrequest_t request, void* out, size_t bytes);

weftResult_t weftPallreduceInit(void* buf, int partitions, size_t count, weftDataType_t datatype, weftRedOp_t op,
                                int tag, weftPartComm_t pc, weftPcoll_t* coll);
weftResult_t weftPbcastInit(void* buf, int partitions, size_t count, weftDataType_t datatype, int root, int tag,
                            weftPartComm_t pc, weftPcoll_t* coll);
weftResult_t weftPcollStart(weftPcoll_t coll);
weftResult_t weftPcollPbufPrepare(weftPcoll_t coll);
weftResult_t weftPcollWait(weftPcoll_t coll);
weftResult_t weftPcollTest(weftPcoll_t coll, int* flag);
weftResult_t weftPcollParrived(weftPcoll_t coll, int partition, int* flag);
/** *deviceHandle: a const weft::part::PcollDeviceHandle* in device memory. */
weftResult_t weftPcollDeviceHandle(weftPcoll_t coll, const void** deviceHandle);
weftResult_t weftPcollFree(weftPcoll_t coll);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PARTITIONED_H_ */
