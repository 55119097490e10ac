#include "runtime/bootstrap.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {

/// What a rank sends the root first. Plain data, same layout on every rank of one machine type.
struct Hello {
  uint64_t magic;
  uint32_t version;
  int32_t rank;
  int32_t nranks;
  int32_t pad;
  net::Address listen;
};

/// The root's answer: status (an ErrorCode), a message, then (on success) nranks addresses.
struct ReplyHeader {
  int32_t status;
  uint32_t message_bytes;
};

/// What a rank sends its ring successor after connecting.
struct RingHello {
  uint64_t magic;
  int32_t rank;
  int32_t pad;
};

double bootstrap_timeout(double timeout_s) {
  return timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_BOOTSTRAP_TIMEOUT");
}

std::string version_string(uint32_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

void send_reply(const net::Socket& s, ErrorCode status, const std::string& message,
                const std::vector<net::Address>& table, net::Deadline deadline) {
  ReplyHeader h{static_cast<int32_t>(status), static_cast<uint32_t>(message.size())};
  try {
    s.send_all(&h, sizeof(h), deadline, "a rank");
    if (!message.empty()) s.send_all(message.data(), message.size(), deadline, "a rank");
    if (status == ErrorCode::Success) s.send_all(table.data(), table.size() * sizeof(net::Address), deadline, "a rank");
  } catch (const Error&) {
    // The rank went away; it learns nothing more from us.
  }
}

/// The root thread: collects every rank's hello, then answers all of them.
void root_main(net::Socket listener, uint64_t magic, net::Deadline deadline) {
  const uint32_t my_version = bootstrap_version();
  int nranks = 0;
  std::vector<net::Socket> conns;         // by rank
  std::vector<net::Address> table;        // by rank
  std::vector<net::Socket> late;          // connections answered with the error
  ErrorCode fatal = ErrorCode::Success;
  std::string fatal_message;
  int joined = 0;
  auto set_fatal = [&](ErrorCode code, std::string msg) {
    if (fatal == ErrorCode::Success) {
      fatal = code;
      fatal_message = std::move(msg);
    }
  };

  while (nranks == 0 || joined < nranks) {
    net::Socket c;
    try {
      c = listener.accept(deadline, "ranks");
    } catch (const Error&) {
      break;  // deadline
    }
    Hello h{};
    try {
      auto hello_deadline = std::min(deadline, net::deadline_in(10));
      c.recv_all(&h, sizeof(h), hello_deadline, "a connecting rank");
    } catch (const Error&) {
      continue;  // not a weft rank, or it died while connecting
    }
    if (h.magic != magic) {
      send_reply(c, ErrorCode::InvalidArgument,
                 "the bootstrap root at " + listener.local_address().str() +
                     " serves another communicator (the unique id's magic differs)",
                 {}, deadline);
      continue;
    }
    if (h.version != my_version) {
      set_fatal(ErrorCode::Remote, "rank " + std::to_string(h.rank) + " runs weft " + version_string(h.version) +
                                       " but the bootstrap root runs weft " + version_string(my_version));
    }
    if (nranks == 0) {
      if (h.nranks <= 0 || h.nranks > (1 << 20)) {
        set_fatal(ErrorCode::InvalidArgument, "rank " + std::to_string(h.rank) + " asked for " +
                                                  std::to_string(h.nranks) + " ranks");
        nranks = 1;
      } else {
        nranks = h.nranks;
      }
      conns.resize(static_cast<size_t>(nranks));
      table.resize(static_cast<size_t>(nranks));
    }
    if (h.nranks != nranks) {
      set_fatal(ErrorCode::InvalidArgument, "rank " + std::to_string(h.rank) + " says the communicator has " +
                                                std::to_string(h.nranks) + " ranks, another rank said " +
                                                std::to_string(nranks));
    }
    if (h.rank < 0 || h.rank >= nranks) {
      set_fatal(ErrorCode::InvalidArgument, "a rank joined with rank " + std::to_string(h.rank) +
                                                ", outside 0.." + std::to_string(nranks - 1));
      late.push_back(std::move(c));
      continue;
    }
    if (conns[static_cast<size_t>(h.rank)].valid()) {
      set_fatal(ErrorCode::InvalidArgument, "two processes joined as rank " + std::to_string(h.rank));
      late.push_back(std::move(c));
      continue;
    }
    table[static_cast<size_t>(h.rank)] = h.listen;
    conns[static_cast<size_t>(h.rank)] = std::move(c);
    ++joined;
    if (fatal != ErrorCode::Success) {
      // Tell everyone who is here now; late comers are answered as they arrive.
      for (auto& s : conns)
        if (s.valid()) {
          send_reply(s, fatal, fatal_message, {}, deadline);
          late.push_back(std::move(s));
        }
    }
  }

  if (fatal == ErrorCode::Success && (nranks == 0 || joined < nranks)) {
    std::string missing;
    int nmissing = 0;
    for (int r = 0; r < nranks; ++r)
      if (!conns[static_cast<size_t>(r)].valid()) {
        if (nmissing < 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++nmissing;
      }
    if (nmissing > 16) missing += ", ...";
    set_fatal(ErrorCode::Timeout, "rank" + std::string(nmissing == 1 ? " " : "s ") + missing + " of " +
                                      std::to_string(nranks) + " did not join the bootstrap at " +
                                      listener.local_address().str() + " before the deadline (WEFT_BOOTSTRAP_TIMEOUT)");
  }
  auto reply_deadline = net::deadline_in(10);
  for (auto& s : conns)
    if (s.valid()) send_reply(s, fatal, fatal_message, table, reply_deadline);
}

}  // namespace

uint32_t bootstrap_version() { return WEFT_VERSION_CODE; }

void UniqueId::serialize(char out[kBytes]) const {
  std::memset(out, 0, kBytes);
  std::memcpy(out, &magic, 8);
  std::memcpy(out + 8, &version, 4);
  static_assert(sizeof(net::Address) <= kBytes - 16);
  std::memcpy(out + 16, &root, sizeof(net::Address));
}

UniqueId UniqueId::deserialize(const char in[kBytes]) {
  UniqueId id;
  std::memcpy(&id.magic, in, 8);
  std::memcpy(&id.version, in + 8, 4);
  std::memcpy(&id.root, in + 16, sizeof(net::Address));
  return id;
}

UniqueId start_bootstrap_root(net::Address address, uint64_t magic, double timeout_s) {
  if (!address.valid()) address = net::default_interface_address();
  if (magic == 0) {
    std::random_device rd;
    std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
    while (magic == 0) magic = gen();
  }
  net::Socket listener = net::Socket::listen(address);
  UniqueId id;
  id.magic = magic;
  id.version = bootstrap_version();
  id.root = listener.local_address();
  auto deadline = net::deadline_in(bootstrap_timeout(timeout_s));
  WEFT_LOG(Info, "BOOT", "bootstrap root listening on " << id.root.str());
  std::thread(root_main, std::move(listener), magic, deadline).detach();
  return id;
}

std::unique_ptr<Bootstrap> Bootstrap::join(const UniqueId& id, int rank, int nranks, double timeout_s,
                                           uint32_t version) {
  if (nranks <= 0) fail(ErrorCode::InvalidArgument, "nranks " + std::to_string(nranks) + " is not positive");
  if (rank < 0 || rank >= nranks)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  if (id.magic == 0 || !id.root.valid())
    fail(ErrorCode::InvalidArgument, "the unique id is empty (create it with weftGetUniqueId on one rank)");
  const double timeout = bootstrap_timeout(timeout_s);
  auto deadline = net::deadline_in(timeout);
  auto b = std::unique_ptr<Bootstrap>(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->magic_ = id.magic;

  net::Socket root = net::Socket::connect(id.root, deadline, "the bootstrap root");
  net::Address local = root.local_address();
  local.port = 0;
  net::Socket listener = net::Socket::listen(local);
  Hello h{};
  h.magic = id.magic;
  h.version = version != 0 ? version : bootstrap_version();
  h.rank = rank;
  h.nranks = nranks;
  h.listen = listener.local_address();
  root.send_all(&h, sizeof(h), deadline, "the bootstrap root");
  // The root answers at its own deadline at the latest; allow it a little beyond ours.
  auto reply_deadline = deadline + std::chrono::seconds(15);
  ReplyHeader rh{};
  try {
    root.recv_all(&rh, sizeof(rh), reply_deadline, "the bootstrap root");
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Timeout)
      fail(ErrorCode::Timeout, "rank " + std::to_string(rank) + ": the other ranks did not all join the bootstrap at " +
                                   id.root.str() + " within " + std::to_string(static_cast<int>(timeout)) + " s");
    throw;
  }
  std::string message(rh.message_bytes, '\0');
  if (rh.message_bytes > (1u << 20)) fail(ErrorCode::Remote, "the bootstrap root sent a malformed reply");
  if (!message.empty()) root.recv_all(message.data(), message.size(), reply_deadline, "the bootstrap root");
  if (rh.status != 0) fail(static_cast<ErrorCode>(rh.status), "bootstrap failed: " + message);
  std::vector<net::Address> table(static_cast<size_t>(nranks));
  root.recv_all(table.data(), table.size() * sizeof(net::Address), reply_deadline, "the bootstrap root");
  root.close();

  if (nranks > 1) {
    const int next = (rank + 1) % nranks;
    const int prev = (rank + nranks - 1) % nranks;
    b->next_ = net::Socket::connect(table[static_cast<size_t>(next)], deadline, "rank " + std::to_string(next));
    RingHello rhello{id.magic, rank, 0};
    b->next_.send_all(&rhello, sizeof(rhello), deadline, "rank " + std::to_string(next));
    while (!b->prev_.valid()) {
      net::Socket s = listener.accept(deadline, "rank " + std::to_string(prev));
      RingHello got{};
      try {
        s.recv_all(&got, sizeof(got), std::min(deadline, net::deadline_in(10)), "rank " + std::to_string(prev));
      } catch (const Error&) {
        continue;
      }
      if (got.magic == id.magic && got.rank == prev) b->prev_ = std::move(s);
    }
  }
  WEFT_LOG(Info, "BOOT", "rank " << rank << " of " << nranks << " joined the bootstrap at " << id.root.str());
  return b;
}

void Bootstrap::allgather(void* data, size_t bytes, double timeout_s) {
  if (nranks_ == 1 || bytes == 0) return;
  if (!next_.valid() || !prev_.valid())
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": the bootstrap is closed");
  double timeout = timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_TIMEOUT");
  auto deadline = net::deadline_in(timeout);
  char* base = static_cast<char*>(data);
  for (int s = 0; s < nranks_ - 1; ++s) {
    int send_block = (rank_ - s + nranks_) % nranks_;
    int recv_block = (rank_ - s - 1 + 2 * nranks_) % nranks_;
    net::exchange(next_, base + static_cast<size_t>(send_block) * bytes, bytes, prev_,
                  base + static_cast<size_t>(recv_block) * bytes, bytes, deadline,
                  "the bootstrap all-gather on rank " + std::to_string(rank_) + " (step " + std::to_string(s) +
                      ", sending to rank " + std::to_string((rank_ + 1) % nranks_) + ", receiving from rank " +
                      std::to_string((rank_ + nranks_ - 1) % nranks_) + ")");
  }
}

void Bootstrap::barrier(double timeout_s) {
  std::vector<char> flags(static_cast<size_t>(nranks_), 1);
  allgather(flags.data(), 1, timeout_s);
}

void Bootstrap::close() {
  next_.close();
  prev_.close();
}

}  // namespace weft
