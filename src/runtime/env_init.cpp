#include "runtime/env_init.hpp"

#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/cuda_check.hpp"
#include "util/config.hpp"
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
  std::string addr = config::get_string("WEFT_BOOTSTRAP_ADDR");
  if (addr.empty()) {
    std::string host = env_str({"MASTER_ADDR"}), port = env_str({"MASTER_PORT"});
    if (!host.empty() && !port.empty()) addr = host + ":" + std::to_string(std::atoi(port.c_str()) + 1);
  }
  if (!addr.empty()) {
    net::Address root = net::parse_address(addr);
    uint64_t magic = std::hash<std::string>{}(addr + "|" + std::to_string(e.nranks) + "|" + job) | 1u;
    if (e.rank == 0) {
      net::Address any = root;
      std::memset(any.addr, 0, sizeof(any.addr));  // listen on every interface, at the given port
      start_bootstrap_root(any, magic);
    }
    e.id.magic = magic;
    e.id.version = bootstrap_version();
    e.id.root = root;
    return e;
  }
  // No address: rank 0 leaves the id in a file named after the job for the others.
  if (job.empty())
    fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: set WEFT_BOOTSTRAP_ADDR (host:port), or MASTER_ADDR and "
                                  "MASTER_PORT, or run under a launcher that sets a job id");
  std::string path = config::get_string("WEFT_BOOTSTRAP_DIR") + "/weft-" + job + ".id";
  for (char& c : path)
    if (c == ':' || c == ' ') c = '_';
  if (e.rank == 0) {
    e.id = start_bootstrap_root();
    char buf[UniqueId::kBytes];
    e.id.serialize(buf);
    std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(buf, sizeof(buf));
      if (!f) fail(ErrorCode::System, "weftCommInitFromEnv: cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(ErrorCode::System, "weftCommInitFromEnv: cannot create " + path);
    return e;
  }
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(config::get_seconds("WEFT_BOOTSTRAP_TIMEOUT"));
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    char buf[UniqueId::kBytes];
    if (f.read(buf, sizeof(buf))) {
      e.id = UniqueId::deserialize(buf);
      return e;
    }
    if (std::chrono::steady_clock::now() > deadline)
      fail(ErrorCode::Timeout, "weftCommInitFromEnv: rank 0 did not publish the unique id in " + path +
                                   " within WEFT_BOOTSTRAP_TIMEOUT");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace weft
