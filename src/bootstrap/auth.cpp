#include "bootstrap/auth.hpp"

#include <errno.h>
#include <sys/random.h>

#include <cstring>

#include "util/error.hpp"
#include "util/secure_memory.hpp"

namespace weft::auth {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void random_bytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t k = getrandom(p, n, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::System, std::string("getrandom failed: ") + std::strerror(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

namespace {
const uint8_t kZeroSecret[Secret::kBytes] = {};
}  // namespace

Secret::Secret(const Secret& o) {
  if (o.slot_ != nullptr) std::memcpy(data(), o.slot_, kBytes);
}

Secret& Secret::operator=(const Secret& o) {
  if (this == &o) return *this;
  if (o.slot_ == nullptr) {
    secure::give_slot(slot_);
    slot_ = nullptr;
  } else {
    std::memcpy(data(), o.slot_, kBytes);
  }
  return *this;
}

Secret& Secret::operator=(Secret&& o) noexcept {
  if (this != &o) {
    secure::give_slot(slot_);
    slot_ = o.slot_;
    o.slot_ = nullptr;
  }
  return *this;
}

Secret::~Secret() { secure::give_slot(slot_); }

const uint8_t* Secret::data() const { return slot_ != nullptr ? slot_ : kZeroSecret; }

uint8_t* Secret::data() {
  if (slot_ == nullptr) slot_ = secure::take_slot();
  return slot_;
}

bool Secret::operator==(const Secret& o) const { return equal_ct(data(), o.data(), kBytes); }

Secret random_secret() {
  Secret s;
  random_bytes(s.data(), s.size());
  return s;
}


Hmac::Hmac(const void* key, size_t key_bytes) {
  uint8_t k[64] = {};
  if (key_bytes > sizeof(k)) {
    Digest d = sha256(key, key_bytes);
    std::memcpy(k, d.data(), d.size());
  } else {
    std::memcpy(k, key, key_bytes);
  }
  uint8_t ikey[64];
  for (size_t i = 0; i < 64; ++i) {
    ikey[i] = k[i] ^ 0x36;
    okey_[i] = k[i] ^ 0x5c;
  }
  inner_.update(ikey, sizeof(ikey));
  secure::wipe(k, sizeof(k));
  secure::wipe(ikey, sizeof(ikey));
}

Hmac::~Hmac() { secure::wipe(okey_, sizeof(okey_)); }

Hmac& Hmac::update(const void* data, size_t n) {
  inner_.update(data, n);
  return *this;
}

Digest Hmac::finish() {
  Digest in = inner_.finish();
  return Sha256().update(okey_, sizeof(okey_)).update(in.data(), in.size()).finish();
}

bool equal_ct(const void* a, const void* b, size_t n) {
  const auto* x = static_cast<const volatile uint8_t*>(a);
  const auto* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff = static_cast<uint8_t>(diff | (x[i] ^ y[i]));
  return diff == 0;
}

Secret secret_from_hex(std::string_view hex, const std::string& what) {
  if (hex.size() < 32 || hex.size() > 128 || hex.size() % 2 != 0)
    fail(ErrorCode::InvalidArgument, what + " must be 32 to 128 hex digits (128 to 512 bits), an even count; it has " +
                                         std::to_string(hex.size()) + " characters");
  uint8_t bytes[64];
  const size_t n = hex.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      secure::wipe(bytes, sizeof(bytes));
      fail(ErrorCode::InvalidArgument,
           what + " has a character that is not a hex digit at position " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
    }
    bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  Secret s;
  {
    Sha256 h;
    Digest d = h.update(bytes, n).finish();
    std::memcpy(s.data(), d.data(), d.size());
    secure::wipe(d.data(), d.size());
  }
  secure::wipe(bytes, sizeof(bytes));
  return s;
}

}  // namespace weft::auth
