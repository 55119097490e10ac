// The real GPU and NVLink layers of topology detection: the CUDA driver (libcuda.so.1) and
// NVML (libnvidia-ml.so.1), both loaded at run time so a CPU-only weft builds and runs without
// them. Only the few entry points detection needs are declared, with the C ABI of their headers.
#include <dlfcn.h>

#include <cstring>

#include "ir/topology_detect.hpp"
#include "util/text.hpp"

namespace weft::detect {

namespace {

std::string dl_error(const char* lib) {
  const char* e = dlerror();
  return std::string(lib) + " cannot be loaded: " + (e != nullptr ? e : "not found");
}

template <typename F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

// CUDA driver API (cuda.h): CUresult is an int enum, CUdevice an int.
constexpr int kAttrSmCount = 16;   // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;   // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;   // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

class CudaDriverProbe final : public GpuProbe {
 public:
  int count(std::string* why) override {
    if (!load(why)) return -1;
    int n = 0;
    if (int r = get_count_(&n); r != 0) {
      if (why != nullptr) *why = "cuDeviceGetCount failed: " + err(r);
      return -1;
    }
    return n;
  }
  GpuInfo gpu(int index) override {
    GpuInfo g;
    int dev = 0;
    if (device_get_(&dev, index) != 0) return g;
    char buf[256] = {};
    if (get_name_(buf, sizeof buf - 1, dev) == 0) g.name = buf;
    size_t bytes = 0;
    if (total_mem_(&bytes, dev) == 0) g.memory_bytes = static_cast<int64_t>(bytes);
    attr_(&g.sm_count, kAttrSmCount, dev);
    attr_(&g.cc_major, kAttrCcMajor, dev);
    attr_(&g.cc_minor, kAttrCcMinor, dev);
    std::memset(buf, 0, sizeof buf);
    if (bus_id_(buf, 64, dev) == 0) g.pci_bus_id = buf;
    return g;
  }
  bool can_access_peer(int a, int b) override {
    int da = 0, db = 0, ok = 0;
    if (device_get_(&da, a) != 0 || device_get_(&db, b) != 0) return false;
    return peer_(&ok, da, db) == 0 && ok != 0;
  }

 private:
  bool load(std::string* why) {
    if (lib_ == nullptr) {
      lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (lib_ == nullptr) {
        if (why != nullptr) *why = dl_error("libcuda.so.1 (the NVIDIA driver)");
        return false;
      }
      int (*init)(unsigned) = nullptr;
      // Every symbol is looked up (no short circuit), so each missing one is left null.
      bool ok = sym(lib_, "cuInit", init);
      ok &= sym(lib_, "cuDeviceGetCount", get_count_);
      ok &= sym(lib_, "cuDeviceGet", device_get_);
      ok &= sym(lib_, "cuDeviceGetName", get_name_);
      ok &= sym(lib_, "cuDeviceTotalMem_v2", total_mem_);
      ok &= sym(lib_, "cuDeviceGetAttribute", attr_);
      ok &= sym(lib_, "cuDeviceGetPCIBusId", bus_id_);
      ok &= sym(lib_, "cuDeviceCanAccessPeer", peer_);
      sym(lib_, "cuGetErrorString", err_string_);
      if (!ok) {
        why_ = "libcuda.so.1 lacks a driver entry point detection needs (driver too old?)";
      } else if (int r = init(0); r != 0) {
        why_ = "cuInit failed: " + err(r);
      } else {
        ready_ = true;
      }
    }
    if (!ready_ && why != nullptr) *why = why_;
    return ready_;
  }
  std::string err(int r) {
    const char* s = nullptr;
    if (err_string_ != nullptr && err_string_(r, &s) == 0 && s != nullptr) return text::format("%s (%d)", s, r);
    return text::format("CUresult %d", r);
  }

  void* lib_ = nullptr;
  bool ready_ = false;
  std::string why_;
  int (*get_count_)(int*) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*get_name_)(char*, int, int) = nullptr;
  int (*total_mem_)(size_t*, int) = nullptr;
  int (*attr_)(int*, int, int) = nullptr;
  int (*bus_id_)(char*, int, int) = nullptr;
  int (*peer_)(int*, int, int) = nullptr;
  int (*err_string_)(int, const char**) = nullptr;
};

// NVML (nvml.h): nvmlReturn_t is an int enum (0 success), nvmlDevice_t an opaque pointer.
struct NvmlPciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kMaxNvlinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvmlDeviceGpu = 0;     // NVML_NVLINK_DEVICE_TYPE_GPU
constexpr int kNvmlDeviceSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

class NvmlProbe final : public NvlinkProbe {
 public:
  ~NvmlProbe() override {
    if (ready_ && shutdown_ != nullptr) shutdown_();
  }
  bool available(std::string* why) override {
    if (lib_ == nullptr && why_.empty()) {
      lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (lib_ == nullptr) {
        why_ = dl_error("libnvidia-ml.so.1 (NVML)");
      } else {
        int (*init)() = nullptr;
        bool ok = sym(lib_, "nvmlInit_v2", init);
        ok &= sym(lib_, "nvmlShutdown", shutdown_);
        ok &= sym(lib_, "nvmlDeviceGetHandleByPciBusId_v2", by_bus_);
        ok &= sym(lib_, "nvmlDeviceGetNvLinkState", state_);
        ok &= sym(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2", remote_);
        sym(lib_, "nvmlDeviceGetNvLinkRemoteDeviceType", remote_type_);  // newer drivers only
        if (!ok) why_ = "libnvidia-ml.so.1 lacks an NVLink entry point (driver too old?)";
        else if (int r = init(); r != 0) why_ = text::format("nvmlInit failed (nvmlReturn_t %d)", r);
        else ready_ = true;
      }
    }
    if (!ready_ && why != nullptr) *why = why_;
    return ready_;
  }
  std::optional<std::vector<NvlinkEnd>> links(const std::string& bus_id, std::string* why) override {
    void* dev = nullptr;
    if (!ready_) return std::nullopt;
    if (int r = by_bus_(bus_id.c_str(), &dev); r != 0) {
      if (why != nullptr) *why = text::format("NVML does not know a GPU at %s (nvmlReturn_t %d)", bus_id.c_str(), r);
      return std::nullopt;
    }
    std::vector<NvlinkEnd> out;
    for (unsigned l = 0; l < kMaxNvlinks; ++l) {
      int active = 0;
      if (state_(dev, l, &active) != 0 || active == 0) continue;  // absent, unsupported or down
      NvmlPciInfo pci{};
      NvlinkEnd end;
      if (remote_(dev, l, &pci) == 0)
        end.pci_bus_id = normalize_bus_id(text::format("%08x:%02x:%02x.0", pci.domain, pci.bus, pci.device)).value_or("");
      int type = -1;
      if (remote_type_ != nullptr && remote_type_(dev, l, &type) == 0)
        end.kind = type == kNvmlDeviceGpu ? NvlinkEnd::Kind::Gpu
                   : type == kNvmlDeviceSwitch ? NvlinkEnd::Kind::Switch
                                               : NvlinkEnd::Kind::Unknown;
      else if (void* other = nullptr; !end.pci_bus_id.empty() && by_bus_(end.pci_bus_id.c_str(), &other) == 0)
        end.kind = NvlinkEnd::Kind::Gpu;  // NVML knows a GPU there
      out.push_back(end);
    }
    return out;
  }

 private:
  void* lib_ = nullptr;
  bool ready_ = false;
  std::string why_;
  int (*shutdown_)() = nullptr;
  int (*by_bus_)(const char*, void**) = nullptr;
  int (*state_)(void*, unsigned, int*) = nullptr;
  int (*remote_)(void*, unsigned, NvmlPciInfo*) = nullptr;
  int (*remote_type_)(void*, unsigned, int*) = nullptr;
};

}  // namespace

std::unique_ptr<GpuProbe> cuda_driver_probe() { return std::make_unique<CudaDriverProbe>(); }
std::unique_ptr<NvlinkProbe> nvml_probe() { return std::make_unique<NvmlProbe>(); }

}  // namespace weft::detect
