// Which host a rank runs on, as the ranks tell each other at initialization (over the
// bootstrap), and the map of hosts made from what every rank sent (plan/placement.hpp's
// HostMap, which the link checks read).
//
// Host identity: a key and a printable name. By default the key hashes the host name
// together with the kernel's boot id (/proc/sys/kernel/random/boot_id; /etc/machine-id
// where there is none): two containers or machines that share a host name but not a kernel
// are different hosts, and ranks of one host always agree. WEFT_HOST_ID=NAME replaces it (a
// testing aid: ranks of one machine given different names form a multi-host communicator
// through the real code path; docs/multi-node.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/placement.hpp"

namespace weft {

/// One rank's host as it travels in the initialization all-gather (trivially copyable).
struct HostIdentity {
  static constexpr size_t kNameBytes = 64;
  uint64_t key = 0;            ///< never 0
  char name[kNameBytes] = {};  ///< printable ASCII, NUL-terminated: for messages only
};

/// The identity from its parts: `override_id` (WEFT_HOST_ID) when not empty, else the host
/// name with `boot_id`, else with `machine_id`. Names are cut to 63 characters and
/// non-printable characters become '?'. Throws InvalidArgument for an override that is not
/// 1 to 63 of [A-Za-z0-9._:-].
HostIdentity make_host_identity(std::string_view hostname, std::string_view boot_id, std::string_view machine_id,
                                std::string_view override_id);

/// This process's identity (WEFT_HOST_ID, gethostname, the boot id, the machine id).
HostIdentity local_host_identity();

/// The key of the machine (kernel) this process runs on, WEFT_HOST_ID ignored: ranks that
/// share CPUs share it, also where WEFT_HOST_ID makes them different hosts.
uint64_t local_machine_key();

/// Checks the identities every rank sent (rank `me` checking): a key of 0, a name without
/// its NUL within the field, empty or with non-printable characters, and one key sent with
/// two names are Remote errors naming the ranks. Equal names with different keys are
/// different hosts.
HostMap map_hosts(int me, const std::vector<HostIdentity>& ids);

}  // namespace weft
