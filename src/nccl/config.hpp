// ncclConfig_t as weft reads it: validated field by field, only the fields the caller's
// header knew (config->size says how many), with one clear error for a bad value.
#pragma once

#include <string>

#include "weft/nccl.h"

namespace weft::nccl {

/// The options weft takes from an ncclConfig_t.
struct CommOptions {
  bool blocking = true;  ///< weft's calls always complete before returning; kept for the log
  std::string name;      ///< commName, shown in log lines
  /// CTAPolicy (tune/cta_policy.hpp), zero winning over efficiency as in NCCL; -1: unset
  /// (NCCL_CTA_POLICY, else WEFT_CTA_POLICY, else default).
  int cta_policy = -1;
};

/// Reads `config` (NULL gives the defaults) for the call named `where`. Throws
/// weft::Error(InvalidArgument) when the struct was not made with NCCL_CONFIG_INITIALIZER
/// (magic), is smaller than NCCL's first version of it, or holds a value out of range:
/// blocking not 0 or 1, a negative CTA count, minCTAs above maxCTAs, an unknown CTAPolicy,
/// splitShare or shrinkShare not 0 or 1. CTAPolicy is read; cgaClusterSize, minCTAs,
/// maxCTAs and the other fields are accepted and ignored. Fields left at NCCL_CONFIG_UNDEF_* keep defaults.
CommOptions parse_config(const ncclConfig_t* config, const char* where);

}  // namespace weft::nccl
