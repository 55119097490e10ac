/* Measured traces through libweft.so (docs/traces.md): weft's internal C entry points for
 * `weft bench --trace`, which links the library as applications do. Not part of the public
 * API (include/weft/weft.h): the record format may change with weft's version. */
#ifndef WEFT_RUNTIME_TRACE_API_H_
#define WEFT_RUNTIME_TRACE_API_H_

#include <stdint.h>

#include "weft/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The next collective call on `comm` records the interpreter's timestamps, at most
 * `records_per_block` (1 to 1000000) per thread block. */
weftResult_t weftTraceArm(weftComm_t comm, uint32_t records_per_block);

/** Waits for `stream`, then sets `*json` to the armed call's trace, one line of JSON
 * (sim/measured_trace.hpp's MeasuredRank), to be released with weftTraceFree. Fails with
 * weftInvalidUsage when no armed call has run. */
weftResult_t weftTraceTake(weftComm_t comm, weftStream_t stream, char** json);

/** Releases what weftTraceTake returned (null: nothing). */
void weftTraceFree(char* json);

#ifdef __cplusplus
}
#endif

#endif
