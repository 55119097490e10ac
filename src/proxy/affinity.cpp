#include "proxy/affinity.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::proxy {

namespace {
constexpr int kMaxCpu = 65535;

int parse_number(const std::string& text, size_t& i, const std::string& what) {
  if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i])))
    fail(ErrorCode::InvalidArgument, what + ": '" + text + "' is not a CPU list such as 0-7,16");
  long v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    v = v * 10 + (text[i++] - '0');
    if (v > kMaxCpu) fail(ErrorCode::InvalidArgument, what + ": CPU numbers in '" + text + "' exceed " + std::to_string(kMaxCpu));
  }
  return static_cast<int>(v);
}
}  // namespace

std::vector<int> parse_cpu_list(const std::string& raw, const std::string& what) {
  std::string text;
  for (char c : raw)
    if (!std::isspace(static_cast<unsigned char>(c))) text += c;
  std::vector<int> out;
  size_t i = 0;
  while (i < text.size()) {
    const int lo = parse_number(text, i, what);
    int hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      hi = parse_number(text, i, what);
      if (hi < lo) fail(ErrorCode::InvalidArgument, what + ": the range " + std::to_string(lo) + "-" + std::to_string(hi) + " in '" + text + "' is reversed");
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    if (i < text.size()) {
      if (text[i] != ',' || i + 1 == text.size())
        fail(ErrorCode::InvalidArgument, what + ": '" + text + "' is not a CPU list such as 0-7,16");
      ++i;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> cpus_near_pci(const std::string& bus_id, const std::string& sysfs) {
  if (bus_id.empty()) return {};
  std::string id;
  for (char c : bus_id) id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // CUDA writes an 8-digit domain ("00000000:18:00.0"); sysfs names 4 digits.
  const size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  std::ifstream f(sysfs + "/bus/pci/devices/" + id + "/local_cpulist");
  if (!f) return {};
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    return parse_cpu_list(text, "local_cpulist of " + id);
  } catch (const Error&) {
    return {};
  }
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::vector<int> proxy_cpus(const std::string& bus_id, std::string* why) {
  const std::string mode = config::get_string("WEFT_PROXY_CPUS");
  if (mode == "none") {
    *why = "not pinned (WEFT_PROXY_CPUS=none)";
    return {};
  }
  const std::vector<int> allowed = allowed_cpus();
  if (mode != "auto" && !mode.empty()) {
    std::vector<int> want = parse_cpu_list(mode, "WEFT_PROXY_CPUS");
    *why = "pinned to CPUs " + format_cpu_list(want) + " (WEFT_PROXY_CPUS)";
    return want;
  }
  const std::vector<int> near = cpus_near_pci(bus_id);
  if (near.empty()) {
    *why = bus_id.empty() ? "not pinned (no GPU)" : "not pinned (no local_cpulist for PCI device " + bus_id + ")";
    return {};
  }
  std::vector<int> both;
  std::set_intersection(near.begin(), near.end(), allowed.begin(), allowed.end(), std::back_inserter(both));
  if (both.empty()) {
    *why = "not pinned (the CPUs near " + bus_id + ", " + format_cpu_list(near) + ", are outside this process's " +
           format_cpu_list(allowed) + ")";
    return {};
  }
  if (both.size() == allowed.size()) {
    *why = "not pinned (every CPU this process may use, " + format_cpu_list(allowed) + ", is near " + bus_id + ")";
    return {};
  }
  *why = "pinned to CPUs " + format_cpu_list(both) + ", near GPU " + bus_id;
  return both;
}

bool pin_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace weft::proxy
