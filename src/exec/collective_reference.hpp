// Reference results of the standard collectives, computed on the host: what the GPU tests,
// the emulator tests and `weft bench`'s #wrong column compare against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft::host {

/// Elements of each rank's send buffer for a call of `count` (the count argument of the
/// C API: AllGather's sendcount, ReduceScatter's recvcount, AllToAll's per-peer count).
size_t send_elems(Collective c, size_t count, int nranks);
/// Elements of each rank's receive buffer.
size_t recv_elems(Collective c, size_t count, int nranks);

/// The expected receive buffer of every rank, given every rank's send buffer. For Reduce,
/// ranks other than the root expect `untouched[r]` (what their receive buffer held before).
/// Avg divides the sum by the rank count as weft does (integer division for integers).
std::vector<std::vector<uint8_t>> reference(Collective c, int dtype, int op, int root, size_t count,
                                            const std::vector<std::vector<uint8_t>>& sends,
                                            const std::vector<std::vector<uint8_t>>& untouched);

/// The expected receive buffer of rank `rank` only (what one process of a GPU test needs),
/// computed with `threads` threads. `untouched` is that rank's receive buffer before the
/// call (used by Reduce on non-root ranks).
std::vector<uint8_t> reference_for_rank(Collective c, int dtype, int op, int root, size_t count, int rank,
                                        const std::vector<std::vector<uint8_t>>& sends,
                                        const std::vector<uint8_t>& untouched, int threads = 1);

/// Fills `n` elements with pseudo-random values that every reduction order combines
/// exactly (small integers, in every type), so results can be compared bit for bit.
/// Element i depends only on (seed, i); `threads` threads share the work.
void fill_random(int dtype, int op, void* data, size_t n, uint64_t seed, int threads = 1);

}  // namespace weft::host
