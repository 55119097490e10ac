// The bootstrap's cryptography: a 256-bit secret drawn from the kernel's CSPRNG,
// HMAC-SHA-256 (RFC 2104, on util/sha256.hpp's SHA-256) for the challenge/response that proves
// a peer holds the secret without ever sending it, and a constant-time compare.
//
// Written here (checked against the published test vectors in
// tests/unit/runtime/test_bootstrap_security.cpp) so that the bootstrap needs no crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "util/sha256.hpp"

namespace weft::auth {

using Digest = Sha256Digest;
using weft::Sha256;
using weft::sha256;
using Secret = std::array<uint8_t, 32>;

/// Fills `n` bytes from getrandom(2) (the kernel's CSPRNG); throws System if it fails.
void random_bytes(void* out, size_t n);
/// A fresh secret from random_bytes.
Secret random_secret();

/// Incremental HMAC-SHA-256 keyed by `key` (any length).
class Hmac {
 public:
  Hmac(const void* key, size_t key_bytes);
  Hmac& update(const void* data, size_t n);
  template <typename T>
  Hmac& add(const T& value) {
    return update(&value, sizeof(value));
  }
  Digest finish();

 private:
  Sha256 inner_;
  uint8_t okey_[64];
};

/// Compares `n` bytes in time that does not depend on where they differ.
bool equal_ct(const void* a, const void* b, size_t n);

/// Reads a secret given as hex (at least 32 digits, i.e. 128 bits; at most 128 digits) and
/// returns SHA-256 of its bytes. Throws InvalidArgument naming `what` (never echoing the value).
Secret secret_from_hex(const std::string& hex, const std::string& what);

}  // namespace weft::auth
