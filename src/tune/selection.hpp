// Selection in names: which algorithm, protocol and number of instances run a collective of
// a given size, as tests, `weft tune` and `weft bench` read it. The choices come from a
// selection table (tune/selection_table.hpp; weft's default is selection/default.json);
// WEFT_ALGO, WEFT_PROTO and WEFT_INSTANCES override them. Every function here answers
// through the one decision (tune/decide.hpp) and the algorithm registry
// (plan/algorithms.hpp); the runtime calls decide() itself.
#pragma once

#include <cstdint>
#include <string>

#include "ir/algorithm.hpp"
#include "plan/algorithms.hpp"
#include "tune/selection_table.hpp"

namespace weft {

/// The one-shot kernel's name in choices, tables and WEFT_ALGO.
inline constexpr const char* kOneShot = algo::kOneShotName;

/// Payload bytes per rank and peer: `bytes` for AllReduce; AllGather's output and
/// ReduceScatter's input (and the others') hold one such part per rank.
uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks);

/// Whether the one-shot kernel can carry collective `c` (AllReduce, AllGather or
/// ReduceScatter) of `bytes` payload (as table_choice counts it) among `nranks` ranks:
/// 2 to 8 ranks and at most exec::kOneShotMaxBytes per rank and peer (the registry's oneshot).
bool oneshot_fits(Collective c, uint64_t bytes, int nranks);

/// Thread blocks the one-shot kernel uses for `peer_bytes` per rank and peer when the table
/// chooses (algo::oneshot_blocks).
int oneshot_blocks(uint64_t peer_bytes);

/// The default table's choice for `bytes` of payload (the larger of the send and receive
/// buffers of one rank) among `nranks` ranks, before environment overrides.
Choice table_choice(Collective c, uint64_t bytes, int nranks, bool in_place = false);

/// `table`'s choice with WEFT_ALGO / WEFT_PROTO / WEFT_INSTANCES applied (read now), instances
/// clamped to 1..max_instances: Decider::chosen. WEFT_ALGO=oneshot applies where the kernel
/// fits (else the table's plan choice stands); WEFT_PROTO=Simple or LL128 turns the table's
/// oneshot into its plan choice.
Choice select_algorithm(const SelectionTable& table, Collective c, uint64_t bytes, int nranks, int max_instances,
                        bool in_place = false);

/// select_algorithm with the default table.
Choice select_algorithm(Collective c, uint64_t bytes, int nranks, int max_instances, bool in_place = false);

/// The protocol a plan call runs with, in names (tune/decide.hpp's effective_protocol): `chosen`,
/// except that across the network (`net`) LL and LL128 run as Simple, and LL128 runs as
/// Simple where the staging slots (`slot_bytes`, `ll_slot_bytes`) are not multiples of 128
/// bytes. `why`, when not null, is set to the reason when it changes.
std::string effective_protocol(const std::string& chosen, bool net, uint64_t slot_bytes, uint64_t ll_slot_bytes,
                               std::string* why = nullptr);

}  // namespace weft
