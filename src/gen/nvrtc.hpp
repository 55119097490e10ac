// NVRTC, loaded at run time (dlopen: libnvrtc.so.13, then libnvrtc.so): nothing links it,
// so the library starts where it is absent, and only generated kernels need it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace weft::gen {

class Nvrtc {
 public:
  /// The process's NVRTC, loaded once from the first of `libraries` that opens and has
  /// every function used (the default: libnvrtc.so.13, libnvrtc.so). Throws
  /// weft::Error(InvalidUsage) naming what is missing and that WEFT_EXECUTOR=interp runs
  /// without it. A non-default list loads afresh (tests).
  static const Nvrtc& get();
  static Nvrtc load(const std::vector<std::string>& libraries);

  /// "major.minor" of the loaded NVRTC.
  const std::string& version() const { return version_; }
  /// The file it was loaded from.
  const std::string& library() const { return library_; }

  /// Compiles `source` (named `name` in messages) with the named `headers` and `options`
  /// to a cubin (the options must name a real architecture, sm_XX). Throws
  /// weft::Error(Internal) with NVRTC's log when the compilation fails.
  std::vector<char> compile(const std::string& source, const std::string& name,
                            const std::vector<std::pair<const char*, const char*>>& headers,
                            const std::vector<std::string>& options) const;

 private:
  struct Api;
  Nvrtc() = default;
  const Api* api_ = nullptr;
  std::string version_;
  std::string library_;
};

/// The options generated kernels are compiled with for architecture `arch` (e.g. 90).
std::vector<std::string> compile_options(int arch);

}  // namespace weft::gen
