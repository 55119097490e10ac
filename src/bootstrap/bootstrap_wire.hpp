// The bootstrap's wire protocol: the handshake that proves both ends hold the
// communicator's secret, and the messages that follow it. Kept apart from bootstrap.cpp so
// that tests can play a hostile root or rank byte for byte.
//
// Handshake on every bootstrap connection (rank -> root, and rank -> its ring successor):
//
//   client -> server  Open   {tag, protocol, magic, client nonce}
//   server -> client  Answer {tag, status, server nonce, S = HMAC(secret, "S", magic, nc, ns)}
//   client -> server  Claim  {kind, version, rank, nranks, listen address},
//                     C = HMAC(secret, "C", magic, ns, nc, claim)
//
// Each end checks the other's proof (constant time) before it believes anything the other
// says; the secret itself never travels, and fresh 256-bit nonces on both sides make a
// recorded handshake useless. The magic is public: it only lets a rank that reached the
// root of another communicator say so. The root's reply to a rank carries
// R = HMAC(secret, "R", nc, ns, header, message, table).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "util/error.hpp"
#include "util/log_limit.hpp"

namespace weft::bootwire {

inline constexpr char kTag[8] = {'W', 'E', 'F', 'T', 'B', 'O', 'O', 'T'};
inline constexpr uint32_t kProtocol = 2;
/// The longest error message a root may send; a longer one is refused before allocating.
inline constexpr uint32_t kMaxMessageBytes = 4096;
/// How long a connection may take over its handshake before it is dropped.
inline constexpr double kHandshakeSeconds = 10;
/// Handshakes in progress at once; beyond this the oldest is dropped.
inline constexpr size_t kMaxPending = 256;

using Nonce = std::array<uint8_t, 32>;

struct Open {
  char tag[8];
  uint32_t protocol;
  uint32_t pad;
  uint64_t magic;
  Nonce nonce;
};

struct Answer {
  char tag[8];
  int32_t status;  ///< 0, or InvalidArgument when the magic names another communicator
  uint32_t pad;
  Nonce nonce;
  auth::Digest proof;
};

enum class ClaimKind : uint32_t { Root = 1, Ring = 2 };

struct Claim {
  uint32_t kind;     ///< ClaimKind
  uint32_t version;  ///< weft version code
  int32_t rank;
  int32_t nranks;
  net::Address listen;  ///< the rank's ring listener (Root claims)
};

struct SignedClaim {
  Claim claim;
  auth::Digest proof;
};

struct ReplyHeader {
  int32_t status;  ///< an ErrorCode
  uint32_t message_bytes;
};

static_assert(sizeof(Open) == 56 && sizeof(Answer) == 80 && sizeof(Claim) == 36 && sizeof(SignedClaim) == 68);

/// A peer failed the handshake: it cannot prove it holds the secret, or it serves another
/// communicator. A rank whose unique id may be stale (the file rendezvous) retries on it.
class AuthError : public Error {
 public:
  using Error::Error;
};

/// Both nonces of one handshake (the reply's proof covers them).
struct Nonces {
  Nonce client{};
  Nonce server{};
};

/// A connection whose claim carried a valid proof.
struct Session {
  net::Socket sock;
  Claim claim{};
  std::string from;  ///< the peer's address, for messages
  Nonces nonces;
};

/// The client's side: sends Open, checks the server's proof (AuthError if it fails or the
/// server serves another communicator), then sends the signed claim. `what` names the
/// server in errors.
Nonces client_handshake(const net::Socket& s, uint64_t magic, const auth::Secret& secret, const Claim& claim,
                        net::Deadline deadline, const std::string& what);

/// The proof over a root's reply.
auth::Digest reply_proof(const auth::Secret& secret, const Nonces& n, const ReplyHeader& h, const std::string& message,
                         const void* table, size_t table_bytes);

/// The server's side for every connection on a listener at once. next() polls the listener
/// and all handshakes in progress together, so a silent or slow connection never delays
/// another; a connection that sends garbage, the wrong magic or a wrong proof is logged
/// (WARN, with its address and the reason) and closed before anything is sent to it but
/// the Answer. Those lines are rate-limited (log::Limiter: 5 a second one by one, then a
/// count per second, and a total when the acceptor is destroyed), so a flood of
/// connections cannot flood the log.
class Acceptor {
 public:
  Acceptor(const net::Socket& listener, uint64_t magic, const auth::Secret& secret, std::string where);
  /// The next authenticated connection, or nullopt once `deadline` has passed or `cancel`
  /// (checked at least every second) is set.
  std::optional<Session> next(net::Deadline deadline, const std::atomic<bool>* cancel = nullptr);
  /// Connections refused so far (garbage, wrong magic, wrong proof).
  int refused() const { return refused_; }
  /// Connections dropped so far: closed or silent through the handshake, or the oldest
  /// dropped beyond kMaxPending.
  int dropped() const { return dropped_; }

 private:
  struct Pending {
    net::Socket sock;
    std::string from;
    net::Deadline until;
    bool answered = false;  ///< Answer sent; waiting for the signed claim
    size_t got = 0;
    union {
      Open open;
      SignedClaim signed_claim;
    } in{};
    Nonces nonces;
  };
  /// Reads what arrived on `p`; true when it is finished (dropped, or `out` filled).
  bool advance(Pending& p, std::optional<Session>& out);
  void refuse(const Pending& p, const std::string& why);
  void drop(log::Level level, const std::string& line);

  const net::Socket& listener_;
  uint64_t magic_;
  auth::Secret secret_;
  std::string where_;
  std::vector<Pending> pending_;
  int refused_ = 0;
  int dropped_ = 0;
  log::Limiter log_;
};

}  // namespace weft::bootwire
