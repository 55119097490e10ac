// Loading algorithms: ResCCLang text, files and built-ins (see load.hpp).
#include "lang/load.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lang/msccl_import.hpp"
#include "lang/resccl_eval.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace fs = std::filesystem;

namespace {

/// Larger inputs are refused rather than read: no algorithm file comes near it.
constexpr uintmax_t kMaxFileBytes = 64u << 20;

std::string read_file(const fs::path& path) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) fail(ErrorCode::System, path.string() + ": cannot read the file (" + ec.message() + ")");
  if (size > kMaxFileBytes)
    fail(ErrorCode::InvalidArgument, path.string() + ": the file has " + std::to_string(size) +
                                         " bytes, more than an algorithm file may have (64 MiB)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::System, path.string() + ": cannot open the file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) fail(ErrorCode::System, path.string() + ": reading the file failed");
  return buf.str();
}

bool has_extension(const std::string& s, std::string_view ext) {
  return s.size() >= ext.size() && s.compare(s.size() - ext.size(), ext.size(), ext) == 0;
}

// MSCCL XML (msccl_import.hpp); the one parameter it takes is InPlace=0|1.
Algorithm load_msccl_xml(const std::string& text, const std::string& file, const ParamMap& overrides) {
  return import_msccl(text, file, msccl_options_from_params(overrides, file)).algorithm;
}

std::string builtin_list() {
  std::string list;
  for (const std::string& n : builtin_algorithm_names()) list += (list.empty() ? "" : ", ") + n;
  return list.empty() ? std::string("none are installed") : list;
}

}  // namespace

Algorithm parse_resccl(std::string_view text, const std::string& filename, const ParamMap& overrides) {
  return resccl::run(text, filename, overrides, resccl::Limits{});
}

Algorithm load_algorithm(const std::string& spec, const ParamMap& overrides) {
  if (spec.empty()) fail(ErrorCode::InvalidArgument, "no algorithm given: name a file or a built-in algorithm");
  std::error_code ec;
  fs::path path(spec);
  bool is_file = fs::is_regular_file(path, ec);
  if (!is_file) {
    bool looks_like_path = spec.find('/') != std::string::npos || has_extension(spec, ".rccl") ||
                           has_extension(spec, ".xml");
    if (looks_like_path) fail(ErrorCode::InvalidArgument, spec + ": no such file");
    fs::path builtin = fs::path(data_dir()) / "algorithms" / (spec + ".rccl");
    if (!fs::is_regular_file(builtin, ec)) {
      // An installed library without its data folder still has the built-ins it shipped with.
      if (auto text = embedded_algorithm(spec))
        return parse_resccl(*text, "(built in) algorithms/" + spec + ".rccl", overrides);
      fail(ErrorCode::InvalidArgument,
           "'" + spec + "' is neither a file nor a built-in algorithm (built-ins: " + builtin_list() + ")");
    }
    path = builtin;
  }
  if (has_extension(path.string(), ".xml")) return load_msccl_xml(read_file(path), path.string(), overrides);
  return parse_resccl(read_file(path), path.string(), overrides);
}

std::string data_dir() {
  std::string env = config::get_string("WEFT_DATA_DIR");
  if (!env.empty()) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path share = exe.parent_path().parent_path() / "share" / "weft";
    if (fs::is_directory(share, ec)) return share.string();
  }
#ifdef WEFT_SOURCE_DIR
  return WEFT_SOURCE_DIR;
#else
  return ".";
#endif
}

std::vector<std::string> builtin_algorithm_names() {
  std::vector<std::string> names;
  std::error_code ec;
  fs::path dir = fs::path(data_dir()) / "algorithms";
  if (!fs::is_directory(dir, ec)) return names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".rccl" && fs::is_regular_file(p, ec)) names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace weft
