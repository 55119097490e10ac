#include "bootstrap/bootstrap.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <thread>

#include "bootstrap/bootstrap_wire.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {

using bootwire::Claim;
using bootwire::ClaimKind;
using bootwire::ReplyHeader;
using bootwire::Session;

double bootstrap_timeout(double timeout_s) {
  return timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_BOOTSTRAP_TIMEOUT");
}

std::string version_string(uint32_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

bool valid_peer_address(const net::Address& a) {
  return (a.family == AF_INET || a.family == AF_INET6) && a.port != 0;
}

bool same_address(const net::Address& a, const net::Address& b) {
  return a.family == b.family && a.port == b.port && std::memcmp(a.addr, b.addr, sizeof(a.addr)) == 0;
}

/// A peer's text, printable ASCII only, so that a message cannot drive the terminal.
std::string printable(std::string s) {
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

/// Sends a root's reply (header, message, table on success, proof); a rank that went away
/// learns nothing more.
void send_reply(const Session& s, const auth::Secret& secret, ErrorCode status, const std::string& message,
                const std::vector<net::Address>& table) {
  std::string msg = message.substr(0, bootwire::kMaxMessageBytes);
  ReplyHeader h{static_cast<int32_t>(status), static_cast<uint32_t>(msg.size())};
  const size_t table_bytes = status == ErrorCode::Success ? table.size() * sizeof(net::Address) : 0;
  auth::Digest proof = bootwire::reply_proof(secret, s.nonces, h, msg, table.data(), table_bytes);
  auto deadline = net::deadline_in(10);
  try {
    s.sock.send_all(&h, sizeof(h), deadline, "a rank");
    if (!msg.empty()) s.sock.send_all(msg.data(), msg.size(), deadline, "a rank");
    if (table_bytes > 0) s.sock.send_all(table.data(), table_bytes, deadline, "a rank");
    s.sock.send_all(proof.data(), proof.size(), deadline, "a rank");
  } catch (const Error&) {
  }
}

/// The root thread: collects every rank's claim, then answers all of them.
class Root {
 public:
  Root(net::Socket listener, uint64_t magic, const auth::Secret& secret, net::Deadline deadline,
       std::function<void()> on_finish)
      : listener_(std::move(listener)),
        where_("the bootstrap root at " + listener_.local_address().str()),
        secret_(secret),
        deadline_(deadline),
        on_finish_(std::move(on_finish)),
        acceptor_(listener_, magic, secret, where_) {}

  void run();

 private:
  void set_fatal(ErrorCode code, const std::string& msg) {
    if (fatal_ != ErrorCode::Success) return;
    fatal_ = code;
    fatal_message_ = msg;
    WEFT_LOG(Warn, "BOOT", where_ << ": " << msg);
  }
  /// Checks one claim; keeps it (by rank, or aside for an error reply).
  void take(Session s);
  /// After a fatal error: answers everyone here now with it.
  void answer_all_with_error();
  bool finished() const;
  std::string missing_ranks() const;

  net::Socket listener_;
  std::string where_;
  auth::Secret secret_;
  net::Deadline deadline_;
  std::function<void()> on_finish_;
  bootwire::Acceptor acceptor_;
  int nranks_ = 0;
  int joined_ = 0;
  std::vector<std::optional<Session>> by_rank_;
  std::vector<bool> answered_;  ///< by rank: sent the fatal error
  std::vector<Session> aside_;  ///< duplicate or out-of-range claims, answered with the error
  ErrorCode fatal_ = ErrorCode::Success;
  std::string fatal_message_;
};

void Root::take(Session s) {
  const Claim& c = s.claim;
  const std::string who = "the process at " + s.from + " (claiming rank " + std::to_string(c.rank) + ")";
  if (c.kind != static_cast<uint32_t>(ClaimKind::Root)) {
    send_reply(s, secret_, ErrorCode::InvalidUsage, where_ + " is a bootstrap root; " + who + " sent a ring claim", {});
    return;
  }
  if (c.nranks <= 0 || c.nranks > (1 << 20)) {
    send_reply(s, secret_, ErrorCode::InvalidArgument,
               who + " asked for " + std::to_string(c.nranks) + " ranks, outside 1..1048576", {});
    return;
  }
  if (nranks_ == 0) {
    nranks_ = c.nranks;
    by_rank_.resize(static_cast<size_t>(nranks_));
    answered_.assign(static_cast<size_t>(nranks_), false);
  }
  const uint32_t mine = bootstrap_version();
  if (c.version != mine)
    set_fatal(ErrorCode::Remote, "rank " + std::to_string(c.rank) + " runs weft " + version_string(c.version) +
                                     " but the bootstrap root runs weft " + version_string(mine));
  if (c.nranks != nranks_)
    set_fatal(ErrorCode::InvalidArgument, "rank " + std::to_string(c.rank) + " says the communicator has " +
                                              std::to_string(c.nranks) + " ranks, another rank said " +
                                              std::to_string(nranks_));
  if (c.rank < 0 || c.rank >= nranks_) {
    set_fatal(ErrorCode::InvalidArgument, "the process at " + s.from + " claimed rank " + std::to_string(c.rank) +
                                              ", outside 0.." + std::to_string(nranks_ - 1));
    aside_.push_back(std::move(s));
  } else if (by_rank_[static_cast<size_t>(c.rank)]) {
    // Neither claimant wins: both get the error (and with them the whole communicator).
    set_fatal(ErrorCode::InvalidArgument, "two processes claimed rank " + std::to_string(c.rank) + ": " +
                                              by_rank_[static_cast<size_t>(c.rank)]->from + " and " + s.from);
    aside_.push_back(std::move(s));
  } else if (!valid_peer_address(c.listen)) {
    set_fatal(ErrorCode::Remote, who + " sent an invalid listen address (" + c.listen.str() + ")");
    by_rank_[static_cast<size_t>(c.rank)] = std::move(s);
    ++joined_;
  } else {
    by_rank_[static_cast<size_t>(c.rank)] = std::move(s);
    ++joined_;
  }
  if (fatal_ != ErrorCode::Success) answer_all_with_error();
}

void Root::answer_all_with_error() {
  for (size_t r = 0; r < by_rank_.size(); ++r)
    if (by_rank_[r]) {
      send_reply(*by_rank_[r], secret_, fatal_, fatal_message_, {});
      by_rank_[r].reset();
      answered_[r] = true;
    }
  for (Session& s : aside_) {
    send_reply(s, secret_, fatal_, fatal_message_, {});
    if (s.claim.rank >= 0 && s.claim.rank < nranks_) answered_[static_cast<size_t>(s.claim.rank)] = true;
  }
  aside_.clear();
}

bool Root::finished() const {
  if (nranks_ == 0) return false;
  if (fatal_ == ErrorCode::Success) return joined_ == nranks_;
  return std::all_of(answered_.begin(), answered_.end(), [](bool a) { return a; });
}

std::string Root::missing_ranks() const {
  std::string missing;
  int n = 0;
  for (int r = 0; r < nranks_; ++r)
    if (!by_rank_[static_cast<size_t>(r)]) {
      if (n < 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      ++n;
    }
  if (n > 16) missing += ", ...";
  return std::string(n == 1 ? "rank " : "ranks ") + missing;
}

void Root::run() {
  while (!finished()) {
    std::optional<Session> s = acceptor_.next(deadline_);
    if (!s) break;
    take(std::move(*s));
  }
  if (on_finish_) {
    try {
      on_finish_();
    } catch (const std::exception& e) {
      WEFT_LOG(Warn, "BOOT", where_ << ": " << e.what());
    }
  }
  if (fatal_ == ErrorCode::Success && joined_ < nranks_)
    set_fatal(ErrorCode::Timeout, missing_ranks() + " of " + std::to_string(nranks_) +
                                      " did not join the bootstrap at " + listener_.local_address().str() +
                                      " before the deadline (WEFT_BOOTSTRAP_TIMEOUT)");
  if (fatal_ != ErrorCode::Success) {
    answer_all_with_error();
    return;
  }
  std::vector<net::Address> table(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) table[static_cast<size_t>(r)] = by_rank_[static_cast<size_t>(r)]->claim.listen;
  for (auto& s : by_rank_) send_reply(*s, secret_, ErrorCode::Success, "", table);
}

bool has_secret(const auth::Secret& s) {
  return std::any_of(s.begin(), s.end(), [](uint8_t b) { return b != 0; });
}

/// What the root told this rank: the table of ring listeners.
struct Joined {
  std::vector<net::Address> table;
  net::Socket listener;
};

/// Reads and checks the root's reply: every field is bounded before it is used.
std::vector<net::Address> read_reply(const net::Socket& root, const UniqueId& id, const bootwire::Nonces& nonces,
                                     int rank, int nranks, const net::Address& mine, net::Deadline deadline,
                                     double timeout) {
  const std::string who = "the bootstrap root at " + id.root.str();
  ReplyHeader rh{};
  try {
    root.recv_all(&rh, sizeof(rh), deadline, who);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Timeout)
      fail(ErrorCode::Timeout, "rank " + std::to_string(rank) + ": the other ranks did not all join the bootstrap at " +
                                   id.root.str() + " within " + std::to_string(static_cast<int>(timeout)) + " s");
    throw;
  }
  if (rh.message_bytes > bootwire::kMaxMessageBytes)
    fail(ErrorCode::Remote, "rank " + std::to_string(rank) + ": " + who + " sent a reply whose message_bytes is " +
                                std::to_string(rh.message_bytes) + ", above the limit of " +
                                std::to_string(bootwire::kMaxMessageBytes) + "; refused");
  if (rh.status < static_cast<int32_t>(ErrorCode::Success) || rh.status > static_cast<int32_t>(ErrorCode::Verify))
    fail(ErrorCode::Remote, "rank " + std::to_string(rank) + ": " + who + " sent status code " +
                                std::to_string(rh.status) + ", which is no weft error code; refused");
  std::string message(rh.message_bytes, '\0');
  if (!message.empty()) root.recv_all(message.data(), message.size(), deadline, who);
  std::vector<net::Address> table;
  if (rh.status == 0) {
    table.resize(static_cast<size_t>(nranks));
    root.recv_all(table.data(), table.size() * sizeof(net::Address), deadline, who);
  }
  auth::Digest proof{};
  root.recv_all(proof.data(), proof.size(), deadline, who);
  auth::Digest want =
      bootwire::reply_proof(id.secret, nonces, rh, message, table.data(), table.size() * sizeof(net::Address));
  if (!auth::equal_ct(want.data(), proof.data(), want.size()))
    fail(ErrorCode::Remote, "rank " + std::to_string(rank) + ": the reply of " + who +
                                " carries no valid proof of the communicator's secret (altered or forged); refused");
  if (rh.status != 0) fail(static_cast<ErrorCode>(rh.status), "bootstrap failed: " + printable(message));
  for (int p = 0; p < nranks; ++p) {
    const net::Address& a = table[static_cast<size_t>(p)];
    if (!valid_peer_address(a) || (p == rank && !same_address(a, mine)))
      fail(ErrorCode::Remote, "rank " + std::to_string(rank) + ": " + who + " gave rank " + std::to_string(p) +
                                  " the address " + a.str() +
                                  (p == rank ? ", not this rank's listener" : ", not a usable one"));
  }
  return table;
}

/// One attempt to join through the root named by `id`.
/// `authenticated` is set once the root has proven the secret: errors after that are final.
Joined join_root(const UniqueId& id, int rank, int nranks, uint32_t version, net::Deadline deadline,
                 net::Deadline connect_deadline, double timeout, bool* authenticated) {
  const std::string who = "the bootstrap root";
  net::Socket root = net::Socket::connect(id.root, connect_deadline, who);
  net::Address local = root.local_address();
  local.port = 0;
  Joined j;
  j.listener = net::Socket::listen(local);  // the interface that reaches the root, never the wildcard
  Claim c{};
  c.kind = static_cast<uint32_t>(ClaimKind::Root);
  c.version = version;
  c.rank = rank;
  c.nranks = nranks;
  c.listen = j.listener.local_address();
  bootwire::Nonces nonces =
      bootwire::client_handshake(root, id.magic, id.secret, c, deadline, who + " at " + id.root.str());
  *authenticated = true;
  // The root answers at its own deadline at the latest; allow it a little beyond ours.
  j.table = read_reply(root, id, nonces, rank, nranks, c.listen, deadline + std::chrono::seconds(15), timeout);
  return j;
}

/// Accepts the ring predecessor on `listener`: the one connection that proves the secret
/// and claims rank `prev` of `nranks`.
net::Socket accept_prev(const net::Socket& listener, const UniqueId& id, int rank, int nranks, net::Deadline deadline,
                        const std::atomic<bool>* cancel) {
  const int prev = (rank + nranks - 1) % nranks;
  bootwire::Acceptor acceptor(listener, id.magic, id.secret, "rank " + std::to_string(rank) + "'s ring listener");
  std::optional<Session> s = acceptor.next(deadline, cancel);
  if (!s)
    fail(ErrorCode::Timeout, "rank " + std::to_string(rank) + ": rank " + std::to_string(prev) +
                                 " did not connect to it in the bootstrap ring before the deadline");
  const Claim& c = s->claim;
  if (c.kind != static_cast<uint32_t>(ClaimKind::Ring) || c.rank != prev || c.nranks != nranks)
    fail(ErrorCode::Remote, "rank " + std::to_string(rank) + ": the process at " + s->from +
                                " joined its ring as rank " + std::to_string(c.rank) + " of " +
                                std::to_string(c.nranks) + " where rank " + std::to_string(prev) + " of " +
                                std::to_string(nranks) + " was expected");
  return std::move(s->sock);
}

}  // namespace

uint32_t bootstrap_version() { return WEFT_VERSION_CODE; }

void UniqueId::serialize(char out[kBytes]) const {
  std::memset(out, 0, kBytes);
  std::memcpy(out, &magic, 8);
  std::memcpy(out + 8, &version, 4);
  static_assert(sizeof(net::Address) <= 32 && 48 + auth::Secret::kBytes <= kBytes);
  std::memcpy(out + 16, &root, sizeof(net::Address));
  std::memcpy(out + 48, secret.data(), secret.size());
}

UniqueId UniqueId::deserialize(const char in[kBytes]) {
  UniqueId id;
  std::memcpy(&id.magic, in, 8);
  std::memcpy(&id.version, in + 8, 4);
  std::memcpy(&id.root, in + 16, sizeof(net::Address));
  std::memcpy(id.secret.data(), in + 48, id.secret.size());
  return id;
}

UniqueId start_bootstrap_root(RootOptions o) {
  if (!o.address.valid()) o.address = net::default_interface_address();
  if (net::is_wildcard(o.address))
    fail(ErrorCode::InvalidArgument, "the bootstrap root never listens on a wildcard address (" + o.address.str() +
                                         ", every interface); give an address of this host that the ranks reach");
  while (o.magic == 0) auth::random_bytes(&o.magic, sizeof(o.magic));
  UniqueId id;
  id.secret = o.secret ? *o.secret : auth::random_secret();
  if (!has_secret(id.secret)) fail(ErrorCode::InvalidArgument, "the bootstrap secret is all zero");
  net::Socket listener = net::Socket::listen(o.address);
  id.magic = o.magic;
  id.version = bootstrap_version();
  id.root = listener.local_address();
  auto deadline = net::deadline_in(bootstrap_timeout(o.timeout_s));
  WEFT_LOG(Info, "BOOT", "bootstrap root listening on " << id.root.str());
  auto root = std::make_shared<Root>(std::move(listener), o.magic, id.secret, deadline, std::move(o.on_finish));
  std::thread([root] { root->run(); }).detach();
  return id;
}

UniqueId start_bootstrap_root(net::Address address, uint64_t magic, double timeout_s) {
  RootOptions o;
  o.address = address;
  o.magic = magic;
  o.timeout_s = timeout_s;
  return start_bootstrap_root(std::move(o));
}

std::unique_ptr<Bootstrap> Bootstrap::join(const UniqueId& id_in, int rank, int nranks, double timeout_s,
                                           uint32_t version) {
  if (nranks <= 0) fail(ErrorCode::InvalidArgument, "nranks " + std::to_string(nranks) + " is not positive");
  if (rank < 0 || rank >= nranks)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  if (id_in.magic == 0 || !id_in.root.valid())
    fail(ErrorCode::InvalidArgument, "the unique id is empty (create it with weftGetUniqueId on one rank)");
  if (!has_secret(id_in.secret))
    fail(ErrorCode::InvalidArgument, "the unique id carries no secret (create it with weftGetUniqueId of this weft)");
  const double timeout = bootstrap_timeout(timeout_s);
  auto deadline = net::deadline_in(timeout);
  if (version == 0) version = bootstrap_version();
  UniqueId id = id_in;
  Joined j;
  for (;;) {
    // With a re-readable id, a root that is not there yet may be a stale file's: try the
    // address a little while, then read the file again.
    auto connect_deadline = id.refresh ? std::min(deadline, net::deadline_in(1)) : deadline;
    bool authenticated = false;
    try {
      j = join_root(id, rank, nranks, version, deadline, connect_deadline, timeout, &authenticated);
      break;
    } catch (const Error& e) {
      if (!id.refresh || authenticated || net::Clock::now() >= deadline) throw;
      WEFT_LOG(Debug, "BOOT", "rank " << rank << ": " << e.what() << "; reading the unique id again");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    id.refresh(id);
  }
  auto b = std::unique_ptr<Bootstrap>(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  if (nranks > 1) {
    // Accept the predecessor while connecting to the successor: both handshakes need an answer.
    std::exception_ptr accept_error;
    std::atomic<bool> cancel{false};
    std::thread acceptor([&] {
      try {
        b->prev_ = accept_prev(j.listener, id, rank, nranks, deadline, &cancel);
      } catch (...) {
        accept_error = std::current_exception();
      }
    });
    std::exception_ptr connect_error;
    try {
      const int next = (rank + 1) % nranks;
      const std::string who = "rank " + std::to_string(next);
      b->next_ = net::Socket::connect(j.table[static_cast<size_t>(next)], deadline, who);
      Claim c{};
      c.kind = static_cast<uint32_t>(ClaimKind::Ring);
      c.version = version;
      c.rank = rank;
      c.nranks = nranks;
      bootwire::client_handshake(b->next_, id.magic, id.secret, c, deadline, who);
    } catch (...) {
      connect_error = std::current_exception();
      b->next_.close();  // the successor's acceptor learns at once
      cancel = true;
    }
    acceptor.join();
    if (connect_error) std::rethrow_exception(connect_error);
    if (accept_error) std::rethrow_exception(accept_error);
  }
  WEFT_LOG(Info, "BOOT", "rank " << rank << " of " << nranks << " joined the bootstrap at " << id.root.str());
  return b;
}

void Bootstrap::allgather(void* data, size_t bytes, double timeout_s) {
  if (nranks_ == 1 || bytes == 0) return;
  if (!next_.valid() || !prev_.valid())
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": the bootstrap is closed");
  double timeout = timeout_s >= 0 ? timeout_s : config::wait_seconds(config::get_seconds("WEFT_TIMEOUT"));
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

std::vector<int> Bootstrap::closed_neighbours() const {
  std::vector<int> out;
  if (nranks_ == 1) return out;
  const int prev = (rank_ + nranks_ - 1) % nranks_, next = (rank_ + 1) % nranks_;
  const bool prev_gone = prev_.peer_closed(), next_gone = next_.peer_closed();
  if (prev == next) {
    if (prev_gone || next_gone) out.push_back(prev);
    return out;
  }
  if (prev_gone) out.push_back(prev);
  if (next_gone) out.push_back(next);
  return out;
}

}  // namespace weft
