#include "gen/kernels.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "gen/cache.hpp"
#include "gen/nvrtc.hpp"
#include "util/cuda_check.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::gen {

namespace {

struct Loaded {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  std::set<int> devices;  ///< devices it has been loaded into (cudaFuncGetAttributes)
};

std::mutex mu;
std::map<std::string, Loaded> loaded;  // by cache key; never unloaded (kernels may be in graphs)

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Loads `cubin` into `l`; the CUDA error, if any (nothing loaded then).
cudaError_t load_cubin(Loaded& l, const std::vector<char>& cubin) {
  cudaError_t e = cudaLibraryLoadData(&l.library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e != cudaSuccess) return e;
  e = cudaLibraryGetKernel(&l.kernel, l.library, kKernelName);
  if (e != cudaSuccess) {
    cudaLibraryUnload(l.library);
    l = Loaded{};
  }
  return e;
}

}  // namespace

void require_nvrtc() { Nvrtc::get(); }

const void* kernel_for(const LoweredPlan& lp, const KernelSpec& requested) {
  const KernelSpec spec = canonical_spec(lp, requested);
  int device = 0, major = 0, minor = 0;
  WEFT_CUDA_CHECK(cudaGetDevice(&device));
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const Nvrtc& nvrtc = Nvrtc::get();
  KeyParts parts;
  parts.source = generate_source(lp, spec);
  static const std::string headers = headers_digest(embedded_headers());
  parts.headers_digest = headers;
  parts.nvrtc_version = nvrtc.version();
  parts.arch = major * 10 + minor;
  parts.options = compile_options(parts.arch);
  parts.weft_version = WEFT_VERSION_STRING;
  const std::string key = cache_key(parts);
  const std::string what = "'" + lp.plan.algorithm + "' rank " + std::to_string(spec.rank) + " (type " +
                           std::to_string(spec.dtype) + ", op " + std::to_string(spec.op) + ", sm_" +
                           std::to_string(parts.arch) + ")";

  std::lock_guard<std::mutex> lock(mu);
  // Setup work may run while the caller captures a CUDA graph: none of it touches the stream.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  WEFT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  struct Restore {
    cudaStreamCaptureMode mode;
    ~Restore() { cudaThreadExchangeStreamCaptureMode(&mode); }
  } restore{mode};
  Loaded& l = loaded[key];
  if (l.kernel == nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    const DiskCache cache(default_cache_dir());
    std::string why;
    std::optional<std::vector<char>> cubin = cache.load(key, &why);
    if (cubin) {
      if (const cudaError_t e = load_cubin(l, *cubin); e != cudaSuccess) {
        why = std::string("CUDA cannot load it: ") + cudaGetErrorString(e);
        cudaGetLastError();  // the error is handled here: compile again
        cubin.reset();
      } else {
        WEFT_LOG(Info, "GEN",
                 "kernel " << what << " loaded from the disk cache " << cache.path_of(key) << " in " << ms_since(t0)
                           << " ms");
      }
    }
    if (!cubin) {
      if (!why.empty()) {
        WEFT_LOG(Warn, "GEN", "cache file " << cache.path_of(key) << " rejected (" << why << "): compiling again");
      }
      cubin = nvrtc.compile(parts.source, "weft_gen_" + key.substr(0, 16) + ".cu", embedded_headers(), parts.options);
      const double compile_ms = ms_since(t0);
      static bool warned = false;  // under mu
      if (!cache.store(key, *cubin, &why) && !warned) {
        warned = true;
        WEFT_LOG(Warn, "GEN",
                 "generated kernels are not cached on disk ("
                     << why << "); they are compiled in memory, once per process (set WEFT_CACHE_DIR)");
      }
      if (const cudaError_t e = load_cubin(l, *cubin); e != cudaSuccess)
        cuda_fail(e, "cudaLibraryLoadData (a generated kernel)", __FILE__, __LINE__);
      WEFT_LOG(Info, "GEN",
               "kernel " << what << " compiled in " << compile_ms << " ms (NVRTC " << nvrtc.version() << ")");
    }
  }
  if (l.devices.insert(device).second) {
    // Load it into this device's context now: under lazy loading a first launch may wait
    // for the context to be idle (see exec/executor.hpp, preload_kernels).
    cudaFuncAttributes attr{};
    WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(l.kernel)));
  }
  return reinterpret_cast<const void*>(l.kernel);
}

}  // namespace weft::gen
