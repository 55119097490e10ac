// TCP sockets with bounded waits, for the bootstrap.
//
// Every blocking operation takes a deadline (std::chrono::steady_clock) and throws
// weft::Error(Timeout) when it passes, naming what it waited for; a closed or reset
// connection is weft::Error(Remote). Nothing here blocks without a bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace weft::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// A deadline `seconds` from now (a negative or huge value is clamped to a day).
Deadline deadline_in(double seconds);

/// An IPv4 or IPv6 address and port, stored in a fixed 28-byte form so that it fits
/// into the unique id.
struct Address {
  uint16_t family = 0;  ///< AF_INET or AF_INET6; 0 = unset
  uint16_t port = 0;    ///< host byte order
  uint8_t addr[16] = {};
  bool valid() const { return family != 0; }
  /// "10.0.0.1:4711" or "[fe80::1]:4711".
  std::string str() const;
};

/// Parses "host:port", "[v6]:port" (host may be a name; resolved once). Throws InvalidArgument,
/// also for an empty host.
Address parse_address(const std::string& host_port);
/// Whether `a` is a wildcard address (0.0.0.0, ::, ::ffff:0.0.0.0): a socket bound there
/// listens on every interface.
bool is_wildcard(const Address& a);
/// Resolves `host` (name or literal) and sets `port`.
Address resolve(const std::string& host, uint16_t port);
/// The address the bootstrap root advertises: the interface named (or prefixed) by
/// WEFT_SOCKET_IFNAME, else the first non-loopback IPv4 interface that is up, else 127.0.0.1.
/// Where honour_nccl_socket_ifname() was called (the NCCL-compatible library does) and
/// WEFT_SOCKET_IFNAME is unset, NCCL_SOCKET_IFNAME stands in for it: a comma list of
/// prefixes, or of exact names after a leading '='; a '^' (exclusion) list is not
/// supported and is ignored with a warning.
Address default_interface_address();
/// Makes default_interface_address read NCCL_SOCKET_IFNAME when WEFT_SOCKET_IFNAME is unset.
void honour_nccl_socket_ifname();

/// An owned socket file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  /// Listens on `addr` (port 0 picks a free one). Throws System naming the address.
  static Socket listen(const Address& addr, int backlog = 128);
  /// Connects to `addr`, retrying refused or unreachable attempts until `deadline`
  /// (the listener may not be up yet). `what` names the peer in errors.
  static Socket connect(const Address& addr, Deadline deadline, const std::string& what);
  /// Accepts one connection on a listening socket before `deadline`.
  Socket accept(Deadline deadline, const std::string& what) const;
  /// Accepts one pending connection without waiting: an invalid Socket when none is
  /// pending. `from` (if given) receives the peer's address.
  Socket try_accept(Address* from) const;

  /// The local address this socket is bound to (for a listener: where peers connect).
  Address local_address() const;

  /// Sends or receives exactly `n` bytes before `deadline`.
  void send_all(const void* data, size_t n, Deadline deadline, const std::string& what) const;
  void recv_all(void* data, size_t n, Deadline deadline, const std::string& what) const;
  /// Reads what has arrived, at most `n` bytes, without waiting: the count (0 when nothing
  /// has), or -1 when the peer closed the connection or it broke.
  long recv_some(void* data, size_t n) const;
  /// Sends `n` bytes without waiting; false unless all were taken at once (meant for a
  /// small message on a fresh connection, whose socket buffer is empty).
  bool send_now(const void* data, size_t n) const;
  /// Whether the peer has closed the connection or it broke, without waiting and without
  /// consuming data that has arrived.
  bool peer_closed() const;

 private:
  int fd_ = -1;
};

/// Sends `n_send` bytes on `out` while receiving `n_recv` bytes on `in`, interleaved so
/// that a ring of ranks that all send first cannot deadlock on full socket buffers.
void exchange(const Socket& out, const void* send_data, size_t n_send, const Socket& in, void* recv_data,
              size_t n_recv, Deadline deadline, const std::string& what);

}  // namespace weft::net
