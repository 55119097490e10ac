// The local half of PreMulSum: dst[i] = src[i] * scalar, in the element type (fp16 and
// bf16 through fp32), before weft sums the scaled values across ranks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace weft::nccl {

/// Launches dst[i] = src[i] * scalar for `count` elements of weft type `type` (0..9) on
/// `stream`. The scalar is read from `device_scalar` when it is not null (at run time, as
/// ncclScalarDevice promises), else from the 8 bytes of `host_scalar`. dst may equal src.
void launch_premul(void* dst, const void* src, size_t count, int type, const void* device_scalar,
                   const unsigned char host_scalar[8], cudaStream_t stream);

/// Loads the scaling kernels into the current device's context (lazy loading would make
/// their first launch wait for the context to go idle: see weft::preload_kernels).
void preload_premul();

}  // namespace weft::nccl
