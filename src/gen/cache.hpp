// The on-disk cache of generated kernels' cubins (docs/generated-kernels.md).
//
// One file per key, `<dir>/<key>.cubin`: a header (magic, the key, the payload's size and
// SHA-256) and the cubin. A cache file is untrusted input: one larger than kMaxCubinBytes,
// with another magic or key, a size that disagrees with the file, or a payload whose digest
// differs is rejected (the caller compiles again and replaces it). Writes go to a temporary
// file renamed into place, so a reader sees a whole file or none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft::gen {

/// The largest cubin the cache reads or writes.
inline constexpr uint64_t kMaxCubinBytes = 64ull << 20;

/// What a cache key is made of: everything that changes the cubin.
struct KeyParts {
  std::string source;          ///< the generated source
  std::string headers_digest;  ///< headers_digest() of the headers it may include
  std::string nvrtc_version;
  std::vector<std::string> options;
  int arch = 0;  ///< e.g. 90
  std::string weft_version;
};

/// 64 hex digits: SHA-256 of the headers' names and texts, each length-prefixed (computed
/// once per process by the caller: they are built into the library).
std::string headers_digest(const std::vector<std::pair<const char*, const char*>>& headers);

/// 64 hex digits: SHA-256 over every part, each length-prefixed.
std::string cache_key(const KeyParts& parts);

/// WEFT_CACHE_DIR if set, else $XDG_CACHE_HOME/weft, else $HOME/.cache/weft; empty when
/// none of them is set (compile in memory).
std::string default_cache_dir();

class DiskCache {
 public:
  /// A cache in `dir` (made on the first store); an empty `dir` keeps nothing.
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  std::string path_of(const std::string& key) const { return dir_ + "/" + key + ".cubin"; }

  /// The cubin stored for `key`. Nothing when there is no file (`why` empty) or the file is
  /// rejected (`why` says why).
  std::optional<std::vector<char>> load(const std::string& key, std::string* why) const;

  /// Stores `cubin` for `key` (temporary file, then rename). False when the folder cannot be
  /// made or written (`why` says why); the caller keeps the cubin in memory.
  bool store(const std::string& key, const std::vector<char>& cubin, std::string* why) const;

 private:
  std::string dir_;
};

}  // namespace weft::gen
