// Generated kernels on the GPU: compiled (src/gen/nvrtc.hpp) or read from the disk cache
// (src/gen/cache.hpp) at first use, loaded with the CUDA runtime's library API, once per
// process; exec/executor.hpp's launch_executor launches them on the caller's stream like
// the interpreter (so CUDA graphs capture them). docs/generated-kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "gen/codegen.hpp"

namespace weft::gen {

/// Loads NVRTC now (throws weft::Error(InvalidUsage) saying what is missing and that
/// WEFT_EXECUTOR=interp runs without it).
void require_nvrtc();

/// The kernel for (lp, spec) on the current device, as the pointer cudaLaunchKernel takes
/// (a cudaKernel_t): from this process's map, else the disk cache, else compiled for the
/// device's architecture (for canonical_spec(lp, spec): one kernel per element size where
/// the plan reduces nothing). Throws weft::Error (NVRTC missing or failing, UnhandledCuda).
const void* kernel_for(const LoweredPlan& lp, const KernelSpec& spec);

}  // namespace weft::gen
