/* LD_PRELOAD library that lets a program drive more CUDA devices than the machine has, by
 * mapping device ordinal d to d % (real count). run_nccl_round.sh preloads it into
 * nccl-tests' `-t 2` runs on a machine with one GPU: nccl-tests gives thread i device
 * (first device + i) and refuses an ordinal at or beyond cudaGetDeviceCount, so without it
 * two threads cannot share device 0. Results of shared devices are correctness only.
 *
 * WEFT_SHARE_GPU_DEVICES=N (N >= 1) is the device count to report; below the real count,
 * or unset, nothing changes. It interposes the CUDA runtime calls of the program that name
 * a device (cudaGetDeviceCount, cudaSetDevice, cudaGetDeviceProperties[_v2],
 * cudaDeviceGetAttribute) when the program links libcudart dynamically; a library holding
 * its own static CUDA runtime (libweft_nccl.so) is not affected and sees the real device
 * the program made current.
 *
 * Build: cc -shared -fPIC -O2 -o libgpu_share_preload.so gpu_share_preload.c -ldl
 * (no CUDA headers needed: cudaError_t is an int and the property struct is passed through). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

enum { kErrorInvalidValue = 1, kErrorInvalidDevice = 101, kErrorSymbolNotFound = 500 };

typedef int (*count_fn)(int*);
typedef int (*set_fn)(int);
typedef int (*props_fn)(void*, int);
typedef int (*attr_fn)(int*, int, int);

static void* next_symbol(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == NULL) fprintf(stderr, "gpu_share_preload: %s not found after this library\n", name);
  return p;
}

/* Read once (a race between threads computes the same value twice). */
static int shown_devices(void) {
  static int shown = -1;
  if (shown >= 0) return shown;
  const char* s = getenv("WEFT_SHARE_GPU_DEVICES");
  char* end = NULL;
  long n = (s == NULL || *s == '\0') ? 0 : strtol(s, &end, 10);
  if (s != NULL && *s != '\0' && (*end != '\0' || n < 1 || n > 1024)) {
    fprintf(stderr, "gpu_share_preload: WEFT_SHARE_GPU_DEVICES=%s is not a count from 1 to 1024; ignored\n", s);
    n = 0;
  }
  shown = (int)n;
  return shown;
}

static int real_count(void) {
  static count_fn real = NULL;
  if (real == NULL) real = (count_fn)next_symbol("cudaGetDeviceCount");
  int n = 0;
  if (real == NULL || real(&n) != 0 || n < 1) return 0;
  return n;
}

/* The real ordinal for a shown one; -1 when d is outside the shown devices. */
static int map_device(int d) {
  int real = real_count();
  if (real == 0) return d;  /* let the real call report the error */
  int shown = shown_devices();
  if (shown <= real || d < 0) return d;
  if (d >= shown) return -1;
  static int said = 0;
  if (!said && d >= real) {
    said = 1;
    fprintf(stderr, "gpu_share_preload: %d devices shown over %d real; device d runs on d %% %d (shared: correctness only)\n",
            shown, real, real);
  }
  return d % real;
}

int cudaGetDeviceCount(int* count) {
  static count_fn real = NULL;
  if (real == NULL) real = (count_fn)next_symbol("cudaGetDeviceCount");
  if (real == NULL) return kErrorSymbolNotFound;
  if (count == NULL) return kErrorInvalidValue;
  int rc = real(count);
  int shown = shown_devices();
  if (rc == 0 && *count >= 1 && shown > *count) *count = shown;
  return rc;
}

int cudaSetDevice(int device) {
  static set_fn real = NULL;
  if (real == NULL) real = (set_fn)next_symbol("cudaSetDevice");
  if (real == NULL) return kErrorSymbolNotFound;
  int d = map_device(device);
  return d < 0 ? kErrorInvalidDevice : real(d);
}

static int properties(const char* name, props_fn* real, void* prop, int device) {
  if (*real == NULL) *real = (props_fn)next_symbol(name);
  if (*real == NULL) return kErrorSymbolNotFound;
  int d = map_device(device);
  return d < 0 ? kErrorInvalidDevice : (*real)(prop, d);
}

int cudaGetDeviceProperties(void* prop, int device) {
  static props_fn real = NULL;
  return properties("cudaGetDeviceProperties", &real, prop, device);
}

int cudaGetDeviceProperties_v2(void* prop, int device) {
  static props_fn real = NULL;
  return properties("cudaGetDeviceProperties_v2", &real, prop, device);
}

int cudaDeviceGetAttribute(int* value, int attr, int device) {
  static attr_fn real = NULL;
  if (real == NULL) real = (attr_fn)next_symbol("cudaDeviceGetAttribute");
  if (real == NULL) return kErrorSymbolNotFound;
  int d = map_device(device);
  return d < 0 ? kErrorInvalidDevice : real(value, attr, d);
}
