/* A stand-in for libcudart.so.13 with one device, for share_preload_check: device 0 exists,
 * any other ordinal is cudaErrorInvalidDevice (101), as the real runtime answers. */
#include <string.h>

static __thread int current = -1;

int cudaGetDeviceCount(int* count) { *count = 1; return 0; }
int cudaSetDevice(int device) { if (device != 0) return 101; current = device; return 0; }
int cudaGetDevice(int* device) { *device = current; return 0; }
int cudaGetDeviceProperties(void* prop, int device) {
  if (device != 0) return 101;
  strcpy((char*)prop, "fake device 0");
  return 0;
}
int cudaDeviceGetAttribute(int* value, int attr, int device) {
  if (device != 0) return 101;
  *value = 1000 + attr;
  return 0;
}
