// SHA-256 (FIPS 180-4): the bootstrap's HMAC (bootstrap/auth.hpp) and the generated
// kernels' disk cache (gen/cache.hpp) hash with it.
//
// Written here (checked against the published test vectors in
// tests/unit/runtime/test_bootstrap_security.cpp) so that weft needs no crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft {

using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();  ///< wipes the state (it may hold key bytes)
  Sha256(const Sha256&) = default;
  Sha256& operator=(const Sha256&) = default;
  Sha256& update(const void* data, size_t n);
  Sha256Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

Sha256Digest sha256(const void* data, size_t n);

}  // namespace weft
