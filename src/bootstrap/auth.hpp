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
#include <string_view>

#include "util/sha256.hpp"

namespace weft::auth {

using Digest = Sha256Digest;
using weft::Sha256;
using weft::sha256;

/// A communicator's 256-bit key. Its bytes live in secret memory (util/secure_memory.hpp:
/// left out of core dumps, locked in RAM where allowed) and are wiped when the object dies;
/// a copy takes a slot of its own. An empty Secret (default, or moved from) reads as all
/// zero and holds no memory until data() is written through.
class Secret {
 public:
  static constexpr size_t kBytes = 32;
  Secret() = default;
  Secret(const Secret& o);
  Secret(Secret&& o) noexcept : slot_(o.slot_) { o.slot_ = nullptr; }
  Secret& operator=(const Secret& o);
  Secret& operator=(Secret&& o) noexcept;
  ~Secret();

  static constexpr size_t size() { return kBytes; }
  /// The bytes (all zero while empty).
  const uint8_t* data() const;
  /// The bytes to write; takes the secret memory on first use.
  uint8_t* data();
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + kBytes; }
  /// Compares in constant time.
  bool operator==(const Secret& o) const;

 private:
  uint8_t* slot_ = nullptr;
};

/// Fills `n` bytes from getrandom(2) (the kernel's CSPRNG); throws System if it fails.
void random_bytes(void* out, size_t n);
/// A fresh secret from random_bytes.
Secret random_secret();

/// Incremental HMAC-SHA-256 keyed by `key` (any length).
class Hmac {
 public:
  Hmac(const void* key, size_t key_bytes);
  ~Hmac();  ///< wipes the key-derived pads
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
/// Makes no copy of `hex`; the decoded bytes and the hash state are wiped before it returns.
Secret secret_from_hex(std::string_view hex, const std::string& what);

}  // namespace weft::auth
