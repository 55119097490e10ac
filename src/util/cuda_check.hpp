// WEFT_CUDA_CHECK(call): turns a failed CUDA runtime call into weft::Error(UnhandledCuda)
// naming the call, the file and line, and CUDA's error name and text.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "util/error.hpp"

namespace weft {

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
  fail(ErrorCode::UnhandledCuda, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                                     cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

/// Makes `device` current for the scope and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (saved_ != device) {
      cudaError_t err = cudaSetDevice(device);
      if (err != cudaSuccess) cuda_fail(err, "cudaSetDevice", __FILE__, __LINE__);
    }
  }
  ~DeviceGuard() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

/// Lets setup work (allocations, uploads on a private stream) run while the caller's
/// thread is capturing a CUDA graph: none of it touches the captured stream.
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace weft

#define WEFT_CUDA_CHECK(call)                                                  \
  do {                                                                         \
    cudaError_t weft_err_ = (call);                                            \
    if (weft_err_ != cudaSuccess) ::weft::cuda_fail(weft_err_, #call, __FILE__, __LINE__); \
  } while (0)
