// Algorithms written in the chunk DSL (chunk_dsl.hpp): the twins of the ResCCLang built-ins
// in algorithms/, traced in the same order so that both front-ends give the same Algorithm
// (same transfers, in the same order, at the same steps) and the compiler the same plan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft::dsl {

/// Ring AllReduce (algorithms/ring_allreduce.rccl): a ring ReduceScatter then a ring
/// AllGather, chunk r ending reduced on rank r. Any ranks >= 1.
Algorithm ring_allreduce(int32_t ranks);

/// All-pairs AllReduce (paper 004 §7.2, algorithms/allpairs_allreduce.rccl): every rank
/// sends chunk q to rank q's scratch, q reduces them, then sends its chunk to everyone.
/// Any ranks >= 1.
Algorithm allpairs_allreduce(int32_t ranks);

/// Hierarchical AllReduce (paper 004 §2; algorithms/hm_allreduce.rccl): intra-node
/// ReduceScatter over a mesh, inter-node ReduceScatter and AllGather over rings of equal
/// local index, intra-node AllGather. ranks must be a multiple of gpus_per_node.
Algorithm hierarchical_allreduce(int32_t ranks, int32_t gpus_per_node);

/// Two-step AllToAll (paper 004 §7.3, algorithms/alltoall_twostep.rccl), out of place:
/// inside each node every chunk goes to the gateway with its destination's local index,
/// then each gateway sends one bundled transfer of gpus_per_node chunks per remote node.
/// ranks must be a multiple of gpus_per_node.
Algorithm alltoall_twostep(int32_t ranks, int32_t gpus_per_node);

/// The algorithms above by the name of their ResCCLang twin (ring_allreduce,
/// allpairs_allreduce, hm_allreduce, alltoall_twostep), sorted.
std::vector<std::string> builtin_names();

/// The algorithm of that name for the shape `params` gives: nRanks (required) and
/// GPUPerNode (the hierarchical ones; default nRanks). Throws InvalidArgument for an unknown
/// name (listing the known ones), an unknown or malformed parameter, or a shape the
/// algorithm refuses.
Algorithm builtin(const std::string& name, const std::map<std::string, std::string>& params);

}  // namespace weft::dsl
