// The host functions of NCCL 2.28's device API (nccl_device.h). weft does not offer that
// API: the resource calls return ncclInvalidUsage with a message; the team queries answer
// for weft's single-node communicators (every rank is reachable by load/store), so that a
// program probing them gets true values. They exist so that a program linked against
// NCCL 2.28 (PyTorch) loads.
#include "nccl/comm.hpp"
#include "nccl/guard.hpp"

using namespace weft::nccl;

namespace {

/// NCCL's ncclTeam: rank `rank` of `nRanks`, world ranks `stride` apart.
struct Team {
  int nRanks, rank, stride;
};

Team world_team(ncclComm_t comm) {
  if (comm == nullptr || comm->magic != ncclComm::kAlive || comm->state != ncclComm::State::Ready) return Team{0, -1, 1};
  return Team{comm->nranks, comm->rank, 1};
}

[[noreturn]] void no_device_api(const char* call) {
  unsupported(std::string("weft does not implement NCCL's device API (") + call + ", nccl_device.h)");
}

}  // namespace

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*) {
  return guard("ncclDevCommCreate", [] { no_device_api("ncclDevCommCreate"); });
}
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void*) {
  return guard("ncclDevCommDestroy", [] { no_device_api("ncclDevCommDestroy"); });
}
ncclResult_t ncclLsaBarrierCreateRequirement(Team, int, void*, void*) {
  return guard("ncclLsaBarrierCreateRequirement", [] { no_device_api("ncclLsaBarrierCreateRequirement"); });
}
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, Team, int, void*, void*) {
  return guard("ncclGinBarrierCreateRequirement", [] { no_device_api("ncclGinBarrierCreateRequirement"); });
}
ncclResult_t ncclLLA2ACreateRequirement(int, int, void*, void*) {
  return guard("ncclLLA2ACreateRequirement", [] { no_device_api("ncclLLA2ACreateRequirement"); });
}
/// NCCL 2.29's query of device-API features; weft offers NCCL 2.28's host API and no device
/// API, so a program asking is told so (and can take its non-device path).
ncclResult_t ncclCommQueryProperties(ncclComm_t, void*) {
  return guard("ncclCommQueryProperties", [] { no_device_api("ncclCommQueryProperties, NCCL 2.29"); });
}
/// No LL all-to-all slots exist in weft: 0.
int ncclLLA2ACalcSlots(int, int) { return 0; }

Team ncclTeamWorld(ncclComm_t comm) { return world_team(comm); }
/// Load/store-accessible ranks: all of them (weft's communicators live on one node).
Team ncclTeamLsa(ncclComm_t comm) { return world_team(comm); }
/// The rail (same local rank on every node): this rank alone on one node.
Team ncclTeamRail(ncclComm_t comm) {
  Team w = world_team(comm);
  return Team{1, 0, w.nRanks > 0 ? w.nRanks : 1};
}
int ncclTeamRankToWorld(ncclComm_t comm, Team team, int rank) {
  Team w = world_team(comm);
  return w.rank + (rank - team.rank) * team.stride;
}
int ncclTeamRankToLsa(ncclComm_t comm, Team team, int rank) { return ncclTeamRankToWorld(comm, team, rank); }

}  // extern "C"

WEFT_NCCL_ALIAS(ncclDevCommCreate)
WEFT_NCCL_ALIAS(ncclDevCommDestroy)
WEFT_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)
WEFT_NCCL_ALIAS(ncclGinBarrierCreateRequirement)
WEFT_NCCL_ALIAS(ncclLLA2ACreateRequirement)
WEFT_NCCL_ALIAS(ncclLLA2ACalcSlots)
WEFT_NCCL_ALIAS(ncclCommQueryProperties)
WEFT_NCCL_ALIAS(ncclTeamWorld)
WEFT_NCCL_ALIAS(ncclTeamLsa)
WEFT_NCCL_ALIAS(ncclTeamRail)
WEFT_NCCL_ALIAS(ncclTeamRankToWorld)
WEFT_NCCL_ALIAS(ncclTeamRankToLsa)
