#include "bootstrap/env_init.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "util/cuda_check.hpp"
#include "bootstrap/rendezvous.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

/// The first of `names` that is set, parsed as an integer; -1 if none is set.
int env_int(std::initializer_list<const char*> names, std::string* which = nullptr) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0) fail(ErrorCode::InvalidArgument, std::string(n) + "='" + v + "' is not a rank number");
    if (which) *which = n;
    return static_cast<int>(x);
  }
  return -1;
}

std::string env_str(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

}  // namespace

EnvLaunch launch_from_env() {
  EnvLaunch e;
  std::string which;
  e.rank = env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"}, &which);
  e.nranks = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", "SLURM_NTASKS"});
  if (e.rank < 0 || e.nranks < 1)
    fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: no launcher environment found (set by mpirun: "
                                  "OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE; by torchrun: RANK and WORLD_SIZE)");
  if (e.rank >= e.nranks)
    fail(ErrorCode::InvalidArgument, "weftCommInitFromEnv: " + which + "=" + std::to_string(e.rank) +
                                         " is not below the world size " + std::to_string(e.nranks));
  e.local_rank = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK", "SLURM_LOCALID"});
  if (e.local_rank < 0) e.local_rank = e.rank;
  int ndev = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: no CUDA device is visible");
  e.device = e.local_rank % ndev;

  const std::string job = env_str({"TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"});
  e.id = rendezvous::unique_id_from_env(e.rank, e.nranks, job);
  return e;
}

}  // namespace weft
