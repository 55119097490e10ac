#include "bootstrap/bootstrap_wire.hpp"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "util/log.hpp"

namespace weft::bootwire {

namespace {

auth::Digest server_proof(const auth::Secret& k, uint64_t magic, const Nonces& n) {
  return auth::Hmac(k.data(), k.size()).update("S", 1).add(magic).add(n.client).add(n.server).finish();
}

auth::Digest claim_proof(const auth::Secret& k, uint64_t magic, const Nonces& n, const Claim& c) {
  return auth::Hmac(k.data(), k.size()).update("C", 1).add(magic).add(n.server).add(n.client).add(c).finish();
}

}  // namespace

Nonces client_handshake(const net::Socket& s, uint64_t magic, const auth::Secret& secret, const Claim& claim,
                        net::Deadline deadline, const std::string& what) {
  Nonces n;
  auth::random_bytes(n.client.data(), n.client.size());
  Open o{};
  std::memcpy(o.tag, kTag, sizeof(kTag));
  o.protocol = kProtocol;
  o.magic = magic;
  o.nonce = n.client;
  s.send_all(&o, sizeof(o), deadline, what);
  Answer a{};
  s.recv_all(&a, sizeof(a), deadline, what);
  if (std::memcmp(a.tag, kTag, sizeof(kTag)) != 0)
    throw AuthError(ErrorCode::Remote, what + " is not a weft bootstrap endpoint (its answer has no weft tag)");
  if (a.status != 0)
    throw AuthError(
        ErrorCode::InvalidArgument,
        what + " serves another communicator (the unique id's magic differs): a stale or foreign unique id");
  n.server = a.nonce;
  auth::Digest want = server_proof(secret, magic, n);
  if (!auth::equal_ct(want.data(), a.proof.data(), want.size()))
    throw AuthError(ErrorCode::Remote, what +
                                           " did not prove that it holds the communicator's secret; nothing was "
                                           "sent to it (a stale unique id, or another process listens there)");
  SignedClaim sc{};
  sc.claim = claim;
  sc.proof = claim_proof(secret, magic, n, claim);
  s.send_all(&sc, sizeof(sc), deadline, what);
  return n;
}

auth::Digest reply_proof(const auth::Secret& secret, const Nonces& n, const ReplyHeader& h, const std::string& message,
                         const void* table, size_t table_bytes) {
  return auth::Hmac(secret.data(), secret.size())
      .update("R", 1)
      .add(n.client)
      .add(n.server)
      .add(h)
      .update(message.data(), message.size())
      .update(table, table_bytes)
      .finish();
}

Acceptor::Acceptor(const net::Socket& listener, uint64_t magic, const auth::Secret& secret, std::string where)
    : listener_(listener),
      magic_(magic),
      secret_(secret),
      where_(std::move(where)),
      log_("BOOT", where_, "connections refused or dropped") {}

void Acceptor::refuse(const Pending& p, const std::string& why) {
  ++refused_;
  log_.note(log::Level::Warn, where_ + " refused the connection from " + p.from + ": " + why);
}

void Acceptor::drop(log::Level level, const std::string& line) {
  ++dropped_;
  log_.note(level, line);
}

bool Acceptor::advance(Pending& p, std::optional<Session>& out) {
  const size_t want = p.answered ? sizeof(SignedClaim) : sizeof(Open);
  auto* buf = reinterpret_cast<char*>(&p.in);
  long k = p.sock.recv_some(buf + p.got, want - p.got);
  if (k < 0) {
    drop(log::Level::Debug, where_ + ": the connection from " + p.from + " closed during the handshake");
    return true;
  }
  p.got += static_cast<size_t>(k);
  if (p.got < want) return false;
  p.got = 0;
  if (!p.answered) {
    const Open& o = p.in.open;
    Answer a{};
    std::memcpy(a.tag, kTag, sizeof(kTag));
    if (std::memcmp(o.tag, kTag, sizeof(kTag)) != 0 || o.protocol != kProtocol) {
      refuse(p, "it does not speak weft's bootstrap protocol " + std::to_string(kProtocol));
      return true;
    }
    if (o.magic != magic_) {
      a.status = static_cast<int32_t>(ErrorCode::InvalidArgument);
      p.sock.send_now(&a, sizeof(a));
      refuse(p, "its unique id names another communicator (magic differs)");
      return true;
    }
    p.nonces.client = o.nonce;
    auth::random_bytes(p.nonces.server.data(), p.nonces.server.size());
    a.nonce = p.nonces.server;
    a.proof = server_proof(secret_, magic_, p.nonces);
    if (!p.sock.send_now(&a, sizeof(a))) {
      drop(log::Level::Debug, where_ + ": the connection from " + p.from + " did not take the answer at once");
      return true;
    }
    p.answered = true;
    return false;
  }
  const SignedClaim& sc = p.in.signed_claim;
  auth::Digest expect = claim_proof(secret_, magic_, p.nonces, sc.claim);
  if (!auth::equal_ct(expect.data(), sc.proof.data(), expect.size())) {
    refuse(p, "it does not hold the communicator's secret (wrong proof)");
    return true;
  }
  out.emplace();
  out->sock = std::move(p.sock);
  out->claim = sc.claim;
  out->from = p.from;
  out->nonces = p.nonces;
  return true;
}

std::optional<Session> Acceptor::next(net::Deadline deadline, const std::atomic<bool>* cancel) {
  for (;;) {
    // Drop handshakes past their own bound (a silent connection costs nobody anything).
    auto now = net::Clock::now();
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [&](const Pending& p) {
                                    if (p.until > now) return false;
                                    drop(log::Level::Debug, where_ + ": dropped the connection from " + p.from +
                                                                ", silent through its handshake");
                                    return true;
                                  }),
                   pending_.end());
    log_.tick();
    if (now >= deadline || (cancel && cancel->load())) return std::nullopt;
    std::vector<pollfd> fds;
    fds.reserve(pending_.size() + 1);
    fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
    auto wake = deadline;
    for (const Pending& p : pending_) {
      fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
      wake = std::min(wake, p.until);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000)));
    if (rc <= 0) continue;  // timeout or EINTR: re-check the deadlines
    std::optional<Session> out;
    std::vector<Pending> keep;
    keep.reserve(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
      bool finished = !out && fds[i + 1].revents != 0 && advance(pending_[i], out);
      if (!finished) keep.push_back(std::move(pending_[i]));
    }
    pending_ = std::move(keep);
    if (out) return out;
    if (fds[0].revents != 0) {
      for (;;) {
        net::Address from;
        net::Socket s = listener_.try_accept(&from);
        if (!s.valid()) break;
        if (pending_.size() >= kMaxPending) {
          drop(log::Level::Warn, where_ + ": " + std::to_string(kMaxPending) +
                                     " handshakes in progress; dropped the oldest, from " + pending_.front().from);
          pending_.erase(pending_.begin());
        }
        Pending p;
        p.sock = std::move(s);
        p.from = from.str();
        p.until = std::min(deadline, net::deadline_in(kHandshakeSeconds));
        pending_.push_back(std::move(p));
      }
    }
  }
}

}  // namespace weft::bootwire
