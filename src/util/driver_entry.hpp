// driver_entry<F>("cuName"): a CUDA driver function reached through the runtime
// (cudaGetDriverEntryPointByVersion, ABI of CUDA 12.0), so that what calls it needs no
// link-time dependency on libcuda. nullptr when this driver does not offer it; the caller says
// what needed it. Header-only: the benches that link the CUDA runtime alone use it too.
#pragma once

#include <cuda_runtime_api.h>

namespace weft {

template <class F>
F driver_entry(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(f);
}

}  // namespace weft
