/* A stand-in for libtorch_cuda.so in the nccl_which.py checks: a shared library whose call to
 * ncclGetVersion the dynamic loader binds to whichever libnccl.so.2 it finds. */
extern int ncclGetVersion(int* version);

int which_consumer_version(void) {
  int v = 0;
  return ncclGetVersion(&v) == 0 ? v : -1;
}
