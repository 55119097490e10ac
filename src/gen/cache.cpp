#include "gen/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "util/sha256.hpp"
#include "util/config.hpp"

namespace weft::gen {

namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'K', 'R', 'N', '1'};
constexpr size_t kKeyChars = 64;
constexpr size_t kHeaderBytes = sizeof(kMagic) + kKeyChars + 8 + 32;

void add_part(Sha256& h, const void* data, uint64_t n) {
  h.update(&n, sizeof(n));
  h.update(data, n);
}
void add_part(Sha256& h, const std::string& s) { add_part(h, s.data(), s.size()); }

std::string hex(const Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string errno_text() { return std::strerror(errno); }

/// Reads exactly n bytes; false on a short read or an error.
bool read_all(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

/// mkdir -p with mode 0700 for the folders it makes.
bool make_dirs(const std::string& dir, std::string* why) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = "cannot make " + part + ": " + errno_text();
      return false;
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = dir + " is not a folder";
    return false;
  }
  return true;
}

}  // namespace

std::string headers_digest(const std::vector<std::pair<const char*, const char*>>& headers) {
  Sha256 h;
  const uint64_t n = headers.size();
  h.update(&n, sizeof(n));
  for (const auto& [name, text] : headers) {
    add_part(h, name, std::strlen(name));
    add_part(h, text, std::strlen(text));
  }
  return hex(h.finish());
}

std::string cache_key(const KeyParts& p) {
  Sha256 h;
  add_part(h, std::string("weft generated kernel cache key v1"));
  add_part(h, p.source);
  add_part(h, p.headers_digest);
  add_part(h, p.nvrtc_version);
  const uint64_t nopt = p.options.size();
  h.update(&nopt, sizeof(nopt));
  for (const std::string& o : p.options) add_part(h, o);
  const int64_t arch = p.arch;
  h.update(&arch, sizeof(arch));
  add_part(h, p.weft_version);
  return hex(h.finish());
}

std::string default_cache_dir() {
  std::string dir = config::get_string("WEFT_CACHE_DIR");
  if (!dir.empty()) return dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') return std::string(x) + "/weft";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::string(home) + "/.cache/weft";
  return "";
}

std::optional<std::vector<char>> DiskCache::load(const std::string& key, std::string* why) const {
  why->clear();
  if (dir_.empty()) return std::nullopt;
  const std::string path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno != ENOENT) *why = "cannot open it: " + errno_text();
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "not a regular file";
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes) {
    *why = "truncated: " + std::to_string(size) + " bytes, shorter than the " + std::to_string(kHeaderBytes) +
           "-byte header";
    return std::nullopt;
  }
  if (size > kHeaderBytes + kMaxCubinBytes) {
    *why = std::to_string(size) + " bytes, more than the " + std::to_string(kMaxCubinBytes) + " a cubin may have";
    return std::nullopt;
  }
  char header[kHeaderBytes];
  if (!read_all(fd, header, kHeaderBytes)) {
    *why = "cannot read its header";
    return std::nullopt;
  }
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    *why = "not a weft kernel cache file (wrong magic)";
    return std::nullopt;
  }
  if (std::string(header + sizeof(kMagic), kKeyChars) != key) {
    *why = "its header carries another key";
    return std::nullopt;
  }
  uint64_t payload = 0;
  std::memcpy(&payload, header + sizeof(kMagic) + kKeyChars, 8);
  if (payload != size - kHeaderBytes) {
    *why = "truncated or padded: the header says " + std::to_string(payload) + " bytes of cubin, the file has " +
           std::to_string(size - kHeaderBytes);
    return std::nullopt;
  }
  std::vector<char> cubin(payload);
  if (!read_all(fd, cubin.data(), payload)) {
    *why = "cannot read its cubin";
    return std::nullopt;
  }
  const Sha256Digest d = sha256(cubin.data(), cubin.size());
  if (std::memcmp(d.data(), header + sizeof(kMagic) + kKeyChars + 8, d.size()) != 0) {
    *why = "its cubin does not match the digest in its header";
    return std::nullopt;
  }
  return cubin;
}

bool DiskCache::store(const std::string& key, const std::vector<char>& cubin, std::string* why) const {
  why->clear();
  if (dir_.empty()) {
    *why = "no cache folder (neither WEFT_CACHE_DIR, XDG_CACHE_HOME nor HOME is set)";
    return false;
  }
  if (cubin.size() > kMaxCubinBytes) {
    *why = "the cubin has " + std::to_string(cubin.size()) + " bytes, more than the cache's " +
           std::to_string(kMaxCubinBytes);
    return false;
  }
  if (!make_dirs(dir_, why)) return false;
  std::random_device rd;
  const std::string tmp = path_of(key) + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot write in " + dir_ + ": " + errno_text();
    return false;
  }
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, sizeof(kMagic));
  std::memcpy(header + sizeof(kMagic), key.data(), std::min(key.size(), kKeyChars));
  const uint64_t payload = cubin.size();
  std::memcpy(header + sizeof(kMagic) + kKeyChars, &payload, 8);
  const Sha256Digest d = sha256(cubin.data(), cubin.size());
  std::memcpy(header + sizeof(kMagic) + kKeyChars + 8, d.data(), d.size());
  const bool ok =
      key.size() == kKeyChars && write_all(fd, header, kHeaderBytes) && write_all(fd, cubin.data(), cubin.size());
  const std::string err = errno_text();
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path_of(key).c_str()) != 0) {
    *why = key.size() != kKeyChars ? "the key is not 64 hex digits"
                                   : "cannot write " + tmp + ": " + (ok ? errno_text() : err);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace weft::gen
