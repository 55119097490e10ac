#include "bootstrap/host_identity.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

/// FNV-1a, 64 bits: the same on every build and platform (std::hash is not).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool printable(char c) { return c > ' ' && c < 0x7f; }

bool host_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == ':' || c == '-';
}

/// The first line of a small file, at most `max` characters; empty when unreadable.
std::string first_line(const char* path, size_t max) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return {};
  if (line.size() > max) line.resize(max);
  return line;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

HostIdentity make_host_identity(std::string_view hostname, std::string_view boot_id, std::string_view machine_id,
                                std::string_view override_id) {
  HostIdentity id;
  std::string name, key;
  if (!override_id.empty()) {
    if (override_id.size() >= HostIdentity::kNameBytes ||
        !std::all_of(override_id.begin(), override_id.end(), host_id_char))
      fail(ErrorCode::InvalidArgument, "WEFT_HOST_ID='" + std::string(override_id.substr(0, 80)) +
                                           "' must be 1 to 63 characters of letters, digits and ._:-");
    name = std::string(override_id);
    key = "weft-host-id\n" + name;
  } else {
    name = std::string(hostname.substr(0, HostIdentity::kNameBytes - 1));
    for (char& c : name)
      if (!printable(c)) c = '?';
    if (name.empty()) name = "?";
    // The boot id tells two kernels apart (containers of one machine share it; machines and
    // their containers do not); the machine id stands in where /proc has no boot id.
    const std::string_view tag = !boot_id.empty() ? boot_id : machine_id;
    key = "weft-host\n" + std::string(hostname) + "\n" + std::string(boot_id.empty() ? "machine-id " : "boot-id ") +
          std::string(tag);
  }
  id.key = fnv1a(key);
  if (id.key == 0) id.key = 1;
  std::memcpy(id.name, name.data(), name.size());
  return id;
}

namespace {
HostIdentity this_machine(std::string_view override_id) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return make_host_identity(host, first_line("/proc/sys/kernel/random/boot_id", 64), first_line("/etc/machine-id", 64),
                            override_id);
}
}  // namespace

HostIdentity local_host_identity() { return this_machine(config::get_string("WEFT_HOST_ID")); }

uint64_t local_machine_key() { return this_machine("").key; }

HostMap map_hosts(int me, const std::vector<HostIdentity>& ids) {
  HostMap m;
  std::map<uint64_t, int> index;       // key -> host index
  std::map<uint64_t, int> first_rank;  // key -> the first rank that sent it
  const std::string who = "rank " + std::to_string(me) + ": ";
  for (size_t r = 0; r < ids.size(); ++r) {
    const HostIdentity& h = ids[r];
    const std::string rank = "rank " + std::to_string(r);
    const size_t len = strnlen(h.name, HostIdentity::kNameBytes);
    if (len == HostIdentity::kNameBytes)
      fail(ErrorCode::Remote, who + rank + " sent a host name without its end within " +
                                  std::to_string(HostIdentity::kNameBytes) + " bytes; refused");
    const std::string name(h.name, len);
    if (name.empty() || !std::all_of(name.begin(), name.end(), printable))
      fail(ErrorCode::Remote, who + rank + " sent an empty host name or one with non-printable characters; refused");
    if (h.key == 0) fail(ErrorCode::Remote, who + rank + " sent the host key 0; refused");
    auto [it, fresh] = index.try_emplace(h.key, m.hosts());
    if (fresh) {
      m.host_names.push_back(name);
      first_rank[h.key] = static_cast<int>(r);
    } else if (m.host_names[static_cast<size_t>(it->second)] != name) {
      fail(ErrorCode::Remote, who + "rank " + std::to_string(first_rank[h.key]) + " and " + rank +
                                  " sent the same host key with different host names (" +
                                  quoted(m.host_names[static_cast<size_t>(it->second)]) + " and " + quoted(name) +
                                  "); refused");
    }
    m.host_of_rank.push_back(it->second);
  }
  return m;
}

}  // namespace weft
