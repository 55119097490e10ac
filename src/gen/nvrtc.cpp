#include "gen/nvrtc.hpp"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::gen {

// NVRTC's C API, declared here (nvrtc.h is not needed to build weft): the program handle
// is a pointer, results are an int enum with 0 = NVRTC_SUCCESS.
struct Nvrtc::Api {
  using Program = void*;
  const char* (*get_error_string)(int) = nullptr;
  int (*version)(int*, int*) = nullptr;
  int (*create_program)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy_program)(Program*) = nullptr;
  int (*compile_program)(Program, int, const char* const*) = nullptr;
  int (*get_program_log_size)(Program, size_t*) = nullptr;
  int (*get_program_log)(Program, char*) = nullptr;
  int (*get_cubin_size)(Program, size_t*) = nullptr;
  int (*get_cubin)(Program, char*) = nullptr;
};

namespace {

[[noreturn]] void missing(const std::string& what) {
  fail(ErrorCode::InvalidUsage,
       "generated kernels (WEFT_EXECUTOR=gen) need NVRTC, the CUDA run-time compiler: " + what +
           "; install it (e.g. the CUDA toolkit's libnvrtc, or add its folder to "
           "LD_LIBRARY_PATH), or set WEFT_EXECUTOR=interp, which runs without it");
}

template <typename F>
bool find(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

}  // namespace

Nvrtc Nvrtc::load(const std::vector<std::string>& libraries) {
  std::string tried;
  for (const std::string& name : libraries) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + (e != nullptr ? std::string(e) : name + ": cannot be opened");
      continue;
    }
    auto api = std::make_unique<Api>();
    const char* absent = nullptr;
    auto need = [&](const char* sym, auto& f) {
      if (absent == nullptr && !find(lib, sym, f)) absent = sym;
    };
    need("nvrtcGetErrorString", api->get_error_string);
    need("nvrtcVersion", api->version);
    need("nvrtcCreateProgram", api->create_program);
    need("nvrtcDestroyProgram", api->destroy_program);
    need("nvrtcCompileProgram", api->compile_program);
    need("nvrtcGetProgramLogSize", api->get_program_log_size);
    need("nvrtcGetProgramLog", api->get_program_log);
    need("nvrtcGetCUBINSize", api->get_cubin_size);
    need("nvrtcGetCUBIN", api->get_cubin);
    if (absent != nullptr) {
      tried += (tried.empty() ? "" : "; ") + name + " has no " + absent + " (NVRTC 11.1 or later is needed)";
      dlclose(lib);
      continue;
    }
    Nvrtc n;
    int major = 0, minor = 0;
    api->version(&major, &minor);
    n.version_ = std::to_string(major) + "." + std::to_string(minor);
    n.library_ = name;
    n.api_ = api.release();  // lives as long as the process: the library stays open
    return n;
  }
  missing("none of the libraries could be loaded (" + tried + ")");
}

const Nvrtc& Nvrtc::get() {
  static std::mutex mu;
  static std::unique_ptr<Nvrtc> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) {
    loaded = std::make_unique<Nvrtc>(load({"libnvrtc.so.13", "libnvrtc.so"}));
    WEFT_LOG(Info, "GEN", "NVRTC " << loaded->version() << " loaded from " << loaded->library());
  }
  return *loaded;
}

std::vector<char> Nvrtc::compile(const std::string& source, const std::string& name,
                                 const std::vector<std::pair<const char*, const char*>>& headers,
                                 const std::vector<std::string>& options) const {
  std::vector<const char*> hnames, htexts, opts;
  for (const auto& [n, t] : headers) {
    hnames.push_back(n);
    htexts.push_back(t);
  }
  for (const std::string& o : options) opts.push_back(o.c_str());
  Api::Program prog = nullptr;
  auto check = [&](int r, const char* what) {
    if (r != 0)
      fail(ErrorCode::Internal,
           std::string("NVRTC ") + what + " failed for " + name + ": " + api_->get_error_string(r));
  };
  check(api_->create_program(&prog, source.c_str(), name.c_str(), static_cast<int>(hnames.size()), htexts.data(),
                             hnames.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    const Api* api;
    Api::Program* p;
    ~Destroy() { api->destroy_program(p); }
  } destroy{api_, &prog};
  const int rc = api_->compile_program(prog, static_cast<int>(opts.size()), opts.data());
  if (rc != 0) {
    size_t n = 0;
    std::string log;
    if (api_->get_program_log_size(prog, &n) == 0 && n > 1) {
      log.resize(n);
      api_->get_program_log(prog, log.data());
      log.resize(n - 1);
    }
    fail(ErrorCode::Internal,
         "NVRTC could not compile the generated kernel " + name + " (" + api_->get_error_string(rc) + "):\n" + log);
  }
  size_t size = 0;
  check(api_->get_cubin_size(prog, &size), "nvrtcGetCUBINSize");
  if (size == 0) fail(ErrorCode::Internal, "NVRTC returned no cubin for " + name + " (the options name no real sm_XX)");
  std::vector<char> cubin(size);
  check(api_->get_cubin(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

std::vector<std::string> compile_options(int arch) {
  return {"--gpu-architecture=sm_" + std::to_string(arch), "-std=c++20"};
}

}  // namespace weft::gen
