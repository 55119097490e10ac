/* Checks tests/gpu/nccl/gpu_share_preload.c (how run_nccl_round.sh lets nccl-tests -t 2 put two
 * ranks on one GPU) against a one-device stand-in runtime (share_preload_fake_cudart.c), with
 * the runtime's versioned symbols as the real libcudart has them.
 * Usage: share_preload_check SHOWN -- SHOWN is the device count the program must see: 2 when
 * run with the preload and WEFT_SHARE_GPU_DEVICES=2 (device 1 runs on device 0, device 2 does
 * not exist), 1 without it or with a bad value (nothing changes). Exit 0 when all hold. */
#include <stdio.h>
#include <stdlib.h>

int cudaGetDeviceCount(int* count);
int cudaSetDevice(int device);
int cudaGetDevice(int* device);
int cudaGetDeviceProperties(void* prop, int device);
int cudaDeviceGetAttribute(int* value, int attr, int device);

static int failures = 0;

static void expect(int cond, const char* what) {
  if (!cond) {
    printf("FAIL: %s\n", what);
    failures++;
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: share_preload_check SHOWN\n");
    return 2;
  }
  int shown = atoi(argv[1]);
  int n = -1;
  expect(cudaGetDeviceCount(&n) == 0 && n == shown, "cudaGetDeviceCount reports the shown count");
  for (int d = 0; d <= shown; d++) {
    int exists = d < shown;
    char prop[1024] = {0};
    int value = -1, cur = -1;
    int rc_set = cudaSetDevice(d);
    cudaGetDevice(&cur);
    int rc_prop = cudaGetDeviceProperties(prop, d);
    int rc_attr = cudaDeviceGetAttribute(&value, 75, d);
    printf("device %d: set %d (current %d), properties %d (%s), attribute %d (%d)\n", d, rc_set, cur, rc_prop, prop,
           rc_attr, value);
    if (exists) {
      expect(rc_set == 0 && cur == 0, "a shown device is made current as device 0");
      expect(rc_prop == 0 && prop[0] == 'f', "a shown device has device 0's properties");
      expect(rc_attr == 0 && value == 1075, "a shown device has device 0's attributes");
    } else {
      expect(rc_set == 101 && rc_prop == 101 && rc_attr == 101, "a device past the shown count is invalid (101)");
    }
  }
  printf("share_preload_check: %s\n", failures == 0 ? "every expectation held" : "FAILED");
  return failures == 0 ? 0 : 1;
}
