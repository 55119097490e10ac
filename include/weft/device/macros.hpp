// weft's one macro header for code that host and device compilers both see.
//
// WEFT_DEVICE_INLINE marks device functions (__forceinline__); WEFT_HOST_DEVICE_INLINE
// functions that the host also calls (geometry, packet layout). Under a host-only
// compiler (g++) the device-only parts are hidden by WEFT_DEVICE_CODE, so data types stay
// visible to host code while their methods are compiled by nvcc only.
#pragma once

#if defined(__CUDACC__)
#define WEFT_DEVICE_CODE 1
#define WEFT_DEVICE_INLINE __device__ __forceinline__
#define WEFT_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define WEFT_DEVICE_CODE 0
#define WEFT_DEVICE_INLINE inline
#define WEFT_HOST_DEVICE_INLINE inline
#endif
