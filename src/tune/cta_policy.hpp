// CTA policies (NCCL 2.28's ncclConfig_t.CTAPolicy and NCCL_CTA_POLICY; weft's
// weftCommSetCtaPolicy and WEFT_CTA_POLICY): how many thread blocks (CTAs) a communicator's
// collectives may take from the application's kernels. docs/runtime.md, "CTA policies".
//
//   default     the selection's fastest choice;
//   efficiency  at most kEfficiencyBlocks plan thread blocks per rank (fewer instances);
//   zero        AllGather, AllToAll and Broadcast run by copy engines (no thread block moves
//               data) wherever their buffers allow it (memory windows, registered buffers);
//               every other call runs as under `default`.
//
// Host-only and pure, so that the rules are unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/algorithm.hpp"

namespace weft {

/// The policies, NCCL's values (NCCL_CTA_POLICY_*).
enum CtaPolicy : int { kCtaDefault = 0, kCtaEfficiency = 1, kCtaZero = 2 };

/// The plan thread blocks per rank the efficiency policy allows at most.
inline constexpr int kEfficiencyBlocks = 16;

/// NCCL's policy flags (0 to 3) as one policy: zero wins over efficiency, as in NCCL.
/// InvalidArgument (naming `where`) outside 0..3.
int normalize_cta_policy(int flags, std::string_view where);

/// Parses NCCL_CTA_POLICY's syntax: a digit 0, 1 or 2, or names DEFAULT, EFFICIENCY and ZERO
/// joined by '|' (any case), normalized. Empty text: -1 (unset). InvalidArgument naming
/// `where` for anything else.
int parse_cta_policy(std::string_view text, std::string_view where);

/// "default", "efficiency", "zero".
const char* cta_policy_name(int policy);

/// Whether the zero policy runs collective c by copy engines where its buffers allow it.
bool zero_cta_collective(Collective c);

/// Instances for a plan choice under the efficiency policy: `instances` cut so that the
/// plan's thread blocks (`blocks` at `instances`, the most of any rank: every rank derives
/// the same) stay within kEfficiencyBlocks, assuming blocks grow in proportion to
/// instances; never below 1, never above `instances`.
int efficiency_instances(int instances, int blocks);

}  // namespace weft
