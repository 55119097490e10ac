// Rank, size, device and rendezvous from a launcher's environment (weftCommInitFromEnv).
#pragma once

#include "bootstrap/bootstrap.hpp"

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
/// SLURM_LOCALID), picks device local_rank % device count, and builds the unique id, secret
/// included, through rendezvous::unique_id_from_env (rank 0 starts the root). Throws
/// InvalidUsage when the environment names no launcher.
EnvLaunch launch_from_env();

}  // namespace weft
