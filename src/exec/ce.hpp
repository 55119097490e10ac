// The copy-engine runner's kernels (exec/ce_runner.hpp runs them; the programs
// come from plan/ce_plan.hpp).
//
// ce_trigger_kernel: one thread. It walks a run of steps: posts signal and put-with-signal
// triggers to the proxy's FIFO (the proxy's copy engines move the data), waits for peers'
// signals and for a flush, each bounded by WEFT_TIMEOUT and the abort flags. It moves no
// data. On a timeout it fills the communicator's error record (kWaitCopyEngine).
//
// ce_reduce_kernel: at most ce::kMaxReduceBlocks thread blocks. dst := a (op) s[0] (op) ...
// (op) s[n-1], element-wise, 16 bytes per thread and step where the pointers allow.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "weft/device/port_channel.hpp"

namespace weft::exec {

constexpr int kCeMaxPeers = 8;   ///< channels per trigger launch (ranks - 1, with room)
constexpr int kCeMaxSteps = 32;  ///< steps per trigger launch (longer runs take several)
constexpr int kCeMaxSources = 8; ///< reduce operands besides `a`

enum CeDevOp : uint8_t { kCeSignal = 0, kCeWait = 1, kCePut = 2, kCeFlush = 3 };

struct CeDevStep {
  uint8_t op = kCeSignal;
  uint8_t peer = 0;       ///< index into CeTriggerArgs::ch
  uint16_t src_mem = 0;   ///< Put: the proxy's memory ids
  uint16_t dst_mem = 0;
  uint16_t rank = 0;      ///< the peer's rank, for the error record
  uint64_t src_off = 0, dst_off = 0, bytes = 0;
};

struct CeTriggerArgs {
  device::PortChannelDeviceHandle ch[kCeMaxPeers];
  CeDevStep steps[kCeMaxSteps];
  int32_t nsteps = 0;
  int32_t rank = 0;
  uint64_t timeout_ns = 0;
  uint32_t* error_claim = nullptr;
  ErrorRecord* error = nullptr;
  uint32_t* abort = nullptr;
};

struct CeReduceArgs {
  char* dst = nullptr;
  const char* a = nullptr;                 ///< may be dst
  const char* src[kCeMaxSources] = {};
  int32_t nsrc = 0;
  uint64_t bytes = 0;                      ///< a whole number of elements
  uint8_t dtype = 0, op = 0;               ///< weftDataType_t, weftRedOp_t (Avg runs as Sum)
};

/// One thread; throws UnhandledCuda if the launch fails.
void launch_ce_triggers(const CeTriggerArgs& args, cudaStream_t stream);
/// `blocks` thread blocks (1 to ce::kMaxReduceBlocks) of kCeReduceThreads.
void launch_ce_reduce(const CeReduceArgs& args, int blocks, cudaStream_t stream);
constexpr int kCeReduceThreads = 256;
/// Loads both kernels now (see preload_kernels in exec/executor.hpp: lazy loading).
void preload_ce_kernels();

}  // namespace weft::exec
