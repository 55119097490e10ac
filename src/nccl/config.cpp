#include "nccl/config.hpp"

#include <cstddef>

#include "util/error.hpp"

namespace weft::nccl {

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// True when the caller's struct (of config->size bytes) holds the field at `offset`.
bool has(const ncclConfig_t* c, size_t offset, size_t bytes) { return c->size >= offset + bytes; }

#define WEFT_HAS(c, field) has(c, offsetof(ncclConfig_t, field), sizeof(ncclConfig_t::field))

[[noreturn]] void bad(const char*, const std::string& what) {
  fail(ErrorCode::InvalidArgument, "ncclConfig_t " + what);
}

void check_flag(const ncclConfig_t* c, bool present, int value, const char* where, const char* field) {
  if (present && value != NCCL_CONFIG_UNDEF_INT && value != 0 && value != 1)
    bad(where, std::string(field) + " is " + std::to_string(value) + "; it must be 0 or 1");
  (void)c;
}

void check_count(bool present, int value, const char* where, const char* field) {
  if (present && value != NCCL_CONFIG_UNDEF_INT && value < 0)
    bad(where, std::string(field) + " is " + std::to_string(value) + "; it must not be negative");
}

}  // namespace

CommOptions parse_config(const ncclConfig_t* c, const char* where) {
  CommOptions o;
  if (c == nullptr) return o;
  if (c->magic != kConfigMagic)
    bad(where, "was not initialized with NCCL_CONFIG_INITIALIZER (magic is not 0xcafebeef)");
  // NCCL's first ncclConfig_t (2.14) ended after netName.
  if (c->size < offsetof(ncclConfig_t, netName) + sizeof(const char*))
    bad(where, "size " + std::to_string(c->size) + " is smaller than any version of the struct");
  check_flag(c, true, c->blocking, where, "blocking");
  if (c->blocking == 0) o.blocking = false;
  check_count(true, c->cgaClusterSize, where, "cgaClusterSize");
  check_count(true, c->minCTAs, where, "minCTAs");
  check_count(true, c->maxCTAs, where, "maxCTAs");
  if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs != NCCL_CONFIG_UNDEF_INT && c->minCTAs > c->maxCTAs)
    bad(where, "minCTAs " + std::to_string(c->minCTAs) + " is above maxCTAs " + std::to_string(c->maxCTAs));
  if (WEFT_HAS(c, splitShare)) check_flag(c, true, c->splitShare, where, "splitShare");
  if (WEFT_HAS(c, commName) && c->commName != nullptr) o.name = c->commName;
  if (WEFT_HAS(c, CTAPolicy) && c->CTAPolicy != NCCL_CONFIG_UNDEF_INT &&
      (c->CTAPolicy < 0 || c->CTAPolicy > (NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO)))
    bad(where, "CTAPolicy " + std::to_string(c->CTAPolicy) + " is not a known policy");
  if (WEFT_HAS(c, CTAPolicy) && c->CTAPolicy != NCCL_CONFIG_UNDEF_INT)
    o.cta_policy = (c->CTAPolicy & NCCL_CTA_POLICY_ZERO) ? NCCL_CTA_POLICY_ZERO : c->CTAPolicy;
  if (WEFT_HAS(c, shrinkShare)) check_flag(c, true, c->shrinkShare, where, "shrinkShare");
  if (WEFT_HAS(c, nvlsCTAs)) check_count(true, c->nvlsCTAs, where, "nvlsCTAs");
  if (WEFT_HAS(c, nChannelsPerNetPeer)) check_count(true, c->nChannelsPerNetPeer, where, "nChannelsPerNetPeer");
  return o;
}

}  // namespace weft::nccl
