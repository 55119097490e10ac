#include "bootstrap/rendezvous.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/secure_memory.hpp"

namespace weft::rendezvous {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

/// A file name for `key`: its safe characters, then 8 hex digits of its hash (so that keys
/// that differ only in unsafe characters do not meet).
std::string file_name(const std::string& prefix, const std::string& key) {
  std::string safe;
  for (char c : key) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  auth::Digest d = auth::sha256(key.data(), key.size());
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", d[0], d[1], d[2], d[3]);
  return prefix + safe.substr(0, 100) + "-" + hex + ".id";
}

/// The root's address from WEFT_BOOTSTRAP_ADDR or MASTER_ADDR / MASTER_PORT; empty if none.
/// `source` says which variables gave it, for errors.
std::string root_address(std::string& source) {
  std::string addr = config::get_string("WEFT_BOOTSTRAP_ADDR");
  source = "WEFT_BOOTSTRAP_ADDR='" + addr + "'";
  if (!addr.empty()) return addr;
  std::string host = env_str("MASTER_ADDR"), port = env_str("MASTER_PORT");
  source = "MASTER_ADDR='" + host + "' (the bootstrap root listens at MASTER_PORT + 1)";
  if (host.empty() || port.empty()) return "";
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 1 || p > 65534)
    fail(ErrorCode::InvalidArgument,
         "MASTER_PORT='" + port + "' is not a port in 1..65534 (weft's root listens at MASTER_PORT + 1)");
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(p + 1);
}

/// Parses the root's address `given`, naming `source` in errors. A wildcard (0.0.0.0, ::,
/// or what resolves to them: "0", "[::0]") is refused: the root would listen on every
/// interface.
net::Address parse_root_address(const std::string& given, const std::string& source) {
  net::Address addr;
  try {
    addr = net::parse_address(given);
  } catch (const Error& e) {
    fail(e.code(), source + ": " + e.what());
  }
  if (net::is_wildcard(addr))
    fail(ErrorCode::InvalidArgument,
         source + " is a wildcard address (" + addr.str() +
             "): weft's bootstrap root never listens on every interface; give this host's address on the network "
             "the ranks share (or 127.0.0.1 when they all run here)");
  return addr;
}

/// Starts the root at `addr`, or at WEFT_SOCKET_IFNAME's address with its port when `addr`
/// cannot be bound (not an address of this host).
UniqueId start_root_at(const net::Address& addr, RootOptions o, const std::string& given) {
  o.address = addr;
  try {
    return start_bootstrap_root(o);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::System || config::get_string("WEFT_SOCKET_IFNAME").empty())
      fail(e.code(), std::string(e.what()) + " (the bootstrap address " + given +
                         " must be one of this host's; or set WEFT_SOCKET_IFNAME to the interface the ranks reach)");
    o.address = net::default_interface_address();
    o.address.port = addr.port;
    WEFT_LOG(Info, "BOOT", "cannot bind " << addr.str() << "; binding WEFT_SOCKET_IFNAME's " << o.address.str());
    return start_bootstrap_root(o);
  }
}

/// Rank 0 of a file rendezvous: starts the root, publishes its id, and has the root remove
/// the file when it is done.
UniqueId start_and_publish(const std::optional<net::Address>& addr, const std::string& given, const std::string& path,
                           const std::optional<auth::Secret>& secret) {
  struct Pending {
    std::mutex mu;
    std::function<void()> remove;
    bool done = false;
  };
  auto pending = std::make_shared<Pending>();
  RootOptions o;
  o.secret = secret;
  o.on_finish = [pending] {
    std::lock_guard<std::mutex> lock(pending->mu);
    pending->done = true;
    if (pending->remove) pending->remove();
  };
  UniqueId id = addr ? start_root_at(*addr, o, given) : start_bootstrap_root(o);
  std::function<void()> remove = publish(path, id);
  std::lock_guard<std::mutex> lock(pending->mu);
  if (pending->done)
    remove();  // the root gave up already
  else
    pending->remove = std::move(remove);
  return id;
}

/// A rank other than 0: waits for rank 0's file, and re-reads it on refusal.
UniqueId wait_published(int rank, const std::string& path) {
  auto deadline = net::deadline_in(config::get_seconds("WEFT_BOOTSTRAP_TIMEOUT"));
  std::optional<UniqueId> id;
  while (!(id = read_published(path))) {
    if (net::Clock::now() >= deadline)
      fail(ErrorCode::Timeout, "weftCommInitFromEnv: rank " + std::to_string(rank) +
                                   ": rank 0 did not publish the "
                                   "unique id in " +
                                   path +
                                   " within WEFT_BOOTSTRAP_TIMEOUT (ranks on several hosts "
                                   "need WEFT_BOOTSTRAP_SECRET, or WEFT_BOOTSTRAP_DIR on a file system they share)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  id->refresh = [path](UniqueId& cur) {
    std::optional<UniqueId> now = read_published(path);
    if (!now || (now->magic == cur.magic && now->secret == cur.secret)) return false;
    cur.magic = now->magic;
    cur.version = now->version;
    cur.root = now->root;
    cur.secret = now->secret;
    return true;
  };
  return *id;
}

}  // namespace

std::string private_dir() {
  const std::string dir = config::get_string("WEFT_BOOTSTRAP_DIR") + "/weft-" + std::to_string(geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    fail(ErrorCode::System, "cannot create the bootstrap directory " + dir + ": " + errno_text());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    fail(ErrorCode::System, "cannot inspect the bootstrap directory " + dir + ": " + errno_text());
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    fail(ErrorCode::InvalidUsage,
         "the bootstrap directory " + dir + " is not a private directory of this user (" +
             (S_ISLNK(st.st_mode) ? std::string("a symbolic link")
                                  : "owner uid " + std::to_string(st.st_uid) + ", mode " + mode) +
             "); remove it or set WEFT_BOOTSTRAP_DIR elsewhere");
  }
  return dir;
}

std::function<void()> publish(const std::string& path, const UniqueId& id) {
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile: try again
    if (S_ISLNK(st.st_mode))
      fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: " + path +
                                        " is a symbolic link; refusing to write the "
                                        "unique id through it");
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
      fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: " + path + " exists and is not a regular file of this user");
    WEFT_LOG(Info, "BOOT", "removing " << path << ", left over from an earlier run");
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fail(ErrorCode::System, "weftCommInitFromEnv: cannot remove the old " + path + ": " + errno_text());
  }
  if (fd < 0) fail(ErrorCode::System, "weftCommInitFromEnv: cannot create " + path + ": " + errno_text());
  char buf[UniqueId::kBytes];
  id.serialize(buf);
  struct stat st {};
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, buf, sizeof(buf)) == static_cast<ssize_t>(sizeof(buf)) &&
            ::fstat(fd, &st) == 0;
  int err = errno;
  secure::wipe(buf, sizeof(buf));
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    fail(ErrorCode::System, "weftCommInitFromEnv: cannot write " + path + ": " + std::strerror(err));
  }
  WEFT_LOG(Info, "BOOT", "published the unique id in " << path);
  return [path, dev = st.st_dev, ino = st.st_ino] {
    struct stat now {};
    if (::lstat(path.c_str(), &now) == 0 && now.st_dev == dev && now.st_ino == ino) ::unlink(path.c_str());
  };
}

std::optional<UniqueId> read_published(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP)
      fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: " + path +
                                        " is a symbolic link; refusing to read the "
                                        "unique id through it");
    fail(ErrorCode::System, "weftCommInitFromEnv: cannot open " + path + ": " + errno_text());
  }
  struct stat st {};
  char buf[UniqueId::kBytes];
  ssize_t got = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0)
    got = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (got < 0)
    fail(ErrorCode::InvalidUsage, "weftCommInitFromEnv: " + path +
                                      " is not a regular file of this user closed to "
                                      "group and others; refusing the unique id in it");
  if (got != static_cast<ssize_t>(sizeof(buf))) {
    secure::wipe(buf, sizeof(buf));
    return std::nullopt;  // still being written
  }
  UniqueId id = UniqueId::deserialize(buf);
  secure::wipe(buf, sizeof(buf));
  return id;
}

UniqueId unique_id_from_env(int rank, int nranks, const std::string& job) {
  std::string source;
  const std::string given = root_address(source);
  std::optional<auth::Secret> secret;
  if (const char* hex = std::getenv("WEFT_BOOTSTRAP_SECRET"); hex != nullptr && *hex != '\0')
    secret = auth::secret_from_hex(hex, "WEFT_BOOTSTRAP_SECRET");
  if (!given.empty()) {
    const net::Address addr = parse_root_address(given, source);
    if (secret) {
      // Every rank knows everything: no file. The magic only names the communicator.
      const std::string key = "weft-env|" + given + "|" + std::to_string(nranks) + "|" + job;
      auth::Digest d = auth::sha256(key.data(), key.size());
      UniqueId id;
      std::memcpy(&id.magic, d.data(), sizeof(id.magic));
      id.magic |= 1;
      if (rank == 0) {
        RootOptions o;
        o.magic = id.magic;
        o.secret = secret;
        return start_root_at(addr, o, given);
      }
      id.version = bootstrap_version();
      id.root = addr;
      id.secret = *secret;
      return id;
    }
    const std::string path = private_dir() + "/" + file_name("addr-", given + "-n" + std::to_string(nranks));
    return rank == 0 ? start_and_publish(addr, given, path, std::nullopt) : wait_published(rank, path);
  }
  if (job.empty())
    fail(ErrorCode::InvalidUsage,
         "weftCommInitFromEnv: set WEFT_BOOTSTRAP_ADDR (host:port), or MASTER_ADDR and "
         "MASTER_PORT, or run under a launcher that sets a job id");
  const std::string path = private_dir() + "/" + file_name("job-", job);
  return rank == 0 ? start_and_publish(std::nullopt, given, path, secret) : wait_published(rank, path);
}

}  // namespace weft::rendezvous
