// Rank, size, device and rendezvous from a launcher's environment (weftCommInitFromEnv).
#pragma once

#include "runtime/bootstrap.hpp"

namespace weft {

struct EnvLaunch {
  int rank = 0;
  int nranks = 1;
  int local_rank = 0;
  int device = 0;
  UniqueId id;
};

/// Reads rank and size (OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, PMI_RANK / PMI_SIZE /
/// MPI_LOCALRANKID, RANK / WORLD_SIZE / LOCAL_RANK, SLURM_PROCID / SLURM_NTASKS /
/// SLURM_LOCALID), picks device local_rank % device count, and builds the unique id:
/// from WEFT_BOOTSTRAP_ADDR, else MASTER_ADDR:(MASTER_PORT + 1) (rank 0 starts the root
/// there), else through a file in WEFT_BOOTSTRAP_DIR named after the job id. Throws
/// InvalidUsage when the environment names no launcher.
EnvLaunch launch_from_env();

}  // namespace weft
