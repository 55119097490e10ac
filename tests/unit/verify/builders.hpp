// The built-in algorithms, built in C++ the way the ResCCLang files under algorithms/
// describe them. The tests verify these directly (no parser needed) and compare the
// parsed .rccl files against them transfer by transfer, so a mistake in either shows.
#pragma once

#include "ir/algorithm.hpp"

namespace weft::test {

Algorithm ring_allgather(int ranks);
Algorithm ring_reducescatter(int ranks);
Algorithm ring_allreduce(int ranks);
/// Hierarchical mesh algorithms (paper 001 Appendix A) on nodes x gpus_per_node ranks.
Algorithm hm_allgather(int nodes, int gpus_per_node);
Algorithm hm_allreduce(int nodes, int gpus_per_node);
Algorithm allpairs_allreduce(int ranks);
Algorithm allpairs_allgather(int ranks);
Algorithm allpairs_reducescatter(int ranks);
Algorithm alltoall_direct(int ranks);
Algorithm alltoall_twostep(int nodes, int gpus_per_node);
/// Rank r sends its whole buffer to rank r+1 (r < ranks-1), crossing nodes through every
/// GPU's NIC; Custom with the postcondition filled.
Algorithm alltonext(int nodes, int gpus_per_node);
Algorithm chain_broadcast(int ranks, int root);
Algorithm chain_reduce(int ranks, int root);

}  // namespace weft::test
