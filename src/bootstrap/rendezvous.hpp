// How the ranks of weftCommInitFromEnv agree on a unique id, secret included, without a
// channel of their own: through an address every rank knows plus either a secret the
// launcher sets (WEFT_BOOTSTRAP_SECRET) or a file only this user can read. Host-only, so
// that its unit tests run without CUDA; env_init.cpp adds rank, size and device.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.hpp"

namespace weft::rendezvous {

/// This rank's unique id. The root's address is WEFT_BOOTSTRAP_ADDR, else
/// MASTER_ADDR:(MASTER_PORT + 1); rank 0 starts the root bound to exactly that address
/// (or, when it is no address of this host, to WEFT_SOCKET_IFNAME's at that port), never
/// to the wildcard. The secret is WEFT_BOOTSTRAP_SECRET (hex) when set, on every rank;
/// else rank 0 draws it and publishes the whole id in private_dir() under a name keyed by
/// the address and rank count. Without an address, rank 0 starts the root on the default
/// interface and publishes the id under a name keyed by `job` (the launcher's job id).
/// Other ranks wait for the file (WEFT_BOOTSTRAP_TIMEOUT) and re-read it while the root
/// refuses them (a file left over from an earlier run). Rank 0's root removes the file
/// once every rank has joined, or when it gives up.
UniqueId unique_id_from_env(int rank, int nranks, const std::string& job);

/// WEFT_BOOTSTRAP_DIR/weft-<uid>, created 0700 when absent; InvalidUsage unless it is a
/// directory (not a symbolic link) of this user that group and others cannot enter.
std::string private_dir();

/// Writes `id` to `path`, created 0600 through open(O_CREAT | O_EXCL | O_NOFOLLOW). A
/// regular file of this user left there is removed first; a symbolic link or anything else
/// is refused (InvalidUsage). Returns what removes the file if it is still the one written.
std::function<void()> publish(const std::string& path, const UniqueId& id);

/// The id published at `path`; nullopt while there is none or it is incomplete.
/// InvalidUsage when `path` is a symbolic link, not a regular file, not this user's, or
/// open to group or others.
std::optional<UniqueId> read_published(const std::string& path);

}  // namespace weft::rendezvous
