// Where a proxy thread runs: near its GPU. The CPUs close to a PCI device are in
// /sys/bus/pci/devices/<bus id>/local_cpulist (Linux); a proxy pins itself to those of them
// the process may use (its own affinity, e.g. from taskset, cgroups or the launcher), best
// effort: nothing found or nothing in common leaves the thread where it is, and says so.
#pragma once

#include <string>
#include <vector>

namespace weft::proxy {

/// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}. Throws InvalidArgument naming `what` for
/// anything else (a reversed range, a stray character, a CPU above 65535).
std::vector<int> parse_cpu_list(const std::string& text, const std::string& what);

/// The CPUs sysfs lists near the PCI device `bus_id` ("0000:18:00.0", any case; a
/// CUDA bus id "00000000:18:00.0" is shortened to 4 domain digits); empty when unknown.
/// `sysfs` is the root (tests).
std::vector<int> cpus_near_pci(const std::string& bus_id, const std::string& sysfs = "/sys");

/// The CPUs the calling thread may run on.
std::vector<int> allowed_cpus();

/// The CPUs a proxy for the GPU at `bus_id` should run on, from WEFT_PROXY_CPUS: auto (near
/// the GPU, within allowed_cpus()), none (empty) or a list. `why` says what was decided, for
/// the log.
std::vector<int> proxy_cpus(const std::string& bus_id, std::string* why);

/// Pins the calling thread to `cpus`; false (errno kept) where the system refuses.
bool pin_this_thread(const std::vector<int>& cpus);

/// "0-3,8" for a sorted list.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace weft::proxy
