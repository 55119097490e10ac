#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::net {

namespace {

std::string errno_text(int err) { return std::string(std::strerror(err)); }

/// Milliseconds left until `deadline`, at least 0, at most 1 s (so loops re-check often).
int poll_ms(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1000));
}

socklen_t to_sockaddr(const Address& a, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof(*ss));
  if (a.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(a.port);
    std::memcpy(&s->sin_addr, a.addr, 4);
    return sizeof(sockaddr_in);
  }
  if (a.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(a.port);
    std::memcpy(&s->sin6_addr, a.addr, 16);
    return sizeof(sockaddr_in6);
  }
  fail(ErrorCode::InvalidArgument, "socket address is unset");
}

Address from_sockaddr(const sockaddr* sa) {
  Address a;
  if (sa->sa_family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(sa);
    a.family = AF_INET;
    a.port = ntohs(s->sin_port);
    std::memcpy(a.addr, &s->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(sa);
    a.family = AF_INET6;
    a.port = ntohs(s->sin6_port);
    std::memcpy(a.addr, &s->sin6_addr, 16);
  }
  return a;
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    fail(ErrorCode::System, "fcntl(O_NONBLOCK) failed: " + errno_text(errno));
}

void set_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

/// Waits until `fd` is ready for `events` or `deadline` passes; returns false on timeout.
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = poll_ms(deadline);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) fail(ErrorCode::System, "poll failed: " + errno_text(errno));
    if (Clock::now() >= deadline) return false;
  }
}

}  // namespace

Deadline deadline_in(double seconds) {
  seconds = std::clamp(seconds, 0.0, 86400.0);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string Address::str() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family == AF_INET) {
    inet_ntop(AF_INET, addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port);
  }
  if (family == AF_INET6) {
    inet_ntop(AF_INET6, addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(port);
  }
  return "(unset)";
}

Address resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    fail(ErrorCode::InvalidArgument, "cannot resolve host '" + host + "': " + gai_strerror(rc));
  Address a;
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    if (p->ai_family == AF_INET || (p->ai_family == AF_INET6 && !a.valid())) a = from_sockaddr(p->ai_addr);
    if (a.family == AF_INET) break;
  }
  freeaddrinfo(res);
  if (!a.valid()) fail(ErrorCode::InvalidArgument, "host '" + host + "' has no IPv4 or IPv6 address");
  a.port = port;
  return a;
}

Address parse_address(const std::string& host_port) {
  std::string host;
  std::string port;
  if (!host_port.empty() && host_port[0] == '[') {
    size_t close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() || host_port[close + 1] != ':')
      fail(ErrorCode::InvalidArgument, "address '" + host_port + "' is not of the form [v6]:port");
    host = host_port.substr(1, close - 1);
    port = host_port.substr(close + 2);
  } else {
    size_t colon = host_port.rfind(':');
    if (colon == std::string::npos || colon == 0)
      fail(ErrorCode::InvalidArgument, "address '" + host_port + "' is not of the form host:port");
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
  }
  if (host.empty()) fail(ErrorCode::InvalidArgument, "address '" + host_port + "' has no host");
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p <= 0 || p > 65535)
    fail(ErrorCode::InvalidArgument, "address '" + host_port + "' has no valid port (1..65535)");
  return resolve(host, static_cast<uint16_t>(p));
}

bool is_wildcard(const Address& a) {
  static const uint8_t zero[16] = {};
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  // ::ffff:0.0.0.0
  if (a.family == AF_INET) return std::memcmp(a.addr, zero, 4) == 0;
  if (a.family == AF_INET6)
    return std::memcmp(a.addr, zero, 16) == 0 ||
           (std::memcmp(a.addr, mapped, 12) == 0 && std::memcmp(a.addr + 12, zero, 4) == 0);
  return false;
}

namespace {
std::atomic<bool> g_nccl_ifname{false};

/// The interface names wanted (prefixes, or exact names when `exact`) and the variable
/// they come from; empty: none named.
std::vector<std::string> wanted_interfaces(std::string& var, bool& exact) {
  exact = false;
  var = "WEFT_SOCKET_IFNAME";
  std::string text = config::get_string(var);
  if (text.empty() && g_nccl_ifname.load()) {
    const char* n = std::getenv("NCCL_SOCKET_IFNAME");
    if (n != nullptr && *n != '\0') {
      var = "NCCL_SOCKET_IFNAME";
      text = n;
      if (text[0] == '^') {
        WEFT_LOG(Warn, "BOOT", "NCCL_SOCKET_IFNAME='" << text << "': exclusion lists are not supported; using the default interface");
        return {};
      }
      if (text[0] == '=') {
        exact = true;
        text.erase(0, 1);
      }
    }
  }
  std::vector<std::string> out;
  for (size_t at = 0; at <= text.size() && !text.empty();) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}
}  // namespace

void honour_nccl_socket_ifname() { g_nccl_ifname.store(true); }

Address default_interface_address() {
  std::string var;
  bool exact = false;
  const std::vector<std::string> want = wanted_interfaces(var, exact);
  auto named = [&](const std::string& name) {
    for (const std::string& w : want)
      if (exact ? name == w : name.compare(0, w.size(), w) == 0) return true;
    return false;
  };
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) fail(ErrorCode::System, "getifaddrs failed: " + errno_text(errno));
  Address found;
  for (ifaddrs* p = list; p != nullptr && !found.valid(); p = p->ifa_next) {
    if (p->ifa_addr == nullptr || !(p->ifa_flags & IFF_UP)) continue;
    if (p->ifa_addr->sa_family != AF_INET && p->ifa_addr->sa_family != AF_INET6) continue;
    std::string name = p->ifa_name ? p->ifa_name : "";
    if (!want.empty()) {
      if (named(name)) found = from_sockaddr(p->ifa_addr);
    } else if (!(p->ifa_flags & IFF_LOOPBACK) && p->ifa_addr->sa_family == AF_INET) {
      found = from_sockaddr(p->ifa_addr);
    }
  }
  freeifaddrs(list);
  if (!found.valid()) {
    if (!want.empty()) {
      std::string text;
      for (const std::string& w : want) text += (text.empty() ? "" : ",") + w;
      fail(ErrorCode::InvalidArgument, var + "='" + (exact ? "=" : "") + text + "' matches no interface that is up");
    }
    found.family = AF_INET;
    const uint8_t lo[4] = {127, 0, 0, 1};
    std::memcpy(found.addr, lo, 4);
  }
  found.port = 0;
  return found;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() { close(); }

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const Address& addr, int backlog) {
  int fd = ::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(ErrorCode::System, "socket() failed: " + errno_text(errno));
  Socket s(fd);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(addr, &ss);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
    fail(ErrorCode::System, "cannot bind a listening socket to " + addr.str() + ": " + errno_text(errno));
  if (::listen(fd, backlog) != 0) fail(ErrorCode::System, "listen on " + addr.str() + " failed: " + errno_text(errno));
  set_nonblocking(fd);
  return s;
}

Socket Socket::connect(const Address& addr, Deadline deadline, const std::string& what) {
  int last_err = 0;
  for (;;) {
    int fd = ::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail(ErrorCode::System, "socket() failed: " + errno_text(errno));
    Socket s(fd);
    set_nonblocking(fd);
    sockaddr_storage ss;
    socklen_t len = to_sockaddr(addr, &ss);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
    if (rc != 0 && errno != EINPROGRESS) {
      last_err = errno;
    } else {
      if (rc != 0 && !wait_ready(fd, POLLOUT, deadline)) last_err = ETIMEDOUT;
      else {
        int err = 0;
        socklen_t elen = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err == 0) {
          set_options(fd);
          return s;
        }
        last_err = err;
      }
    }
    bool retryable = last_err == ECONNREFUSED || last_err == ENETUNREACH || last_err == EHOSTUNREACH ||
                     last_err == ETIMEDOUT || last_err == ECONNRESET || last_err == EAGAIN;
    if (!retryable)
      fail(ErrorCode::System, "cannot connect to " + what + " at " + addr.str() + ": " + errno_text(last_err));
    if (Clock::now() >= deadline)
      fail(ErrorCode::Timeout, "could not connect to " + what + " at " + addr.str() + " before the deadline (" +
                                   errno_text(last_err) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Socket Socket::accept(Deadline deadline, const std::string& what) const {
  for (;;) {
    if (!wait_ready(fd_, POLLIN, deadline)) fail(ErrorCode::Timeout, "timed out waiting for " + what + " to connect");
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      set_nonblocking(fd);
      set_options(fd);
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      fail(ErrorCode::System, "accept failed while waiting for " + what + ": " + errno_text(errno));
  }
}

Socket Socket::try_accept(Address* from) const {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      set_nonblocking(fd);
      set_options(fd);
      if (from) *from = from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
      return s;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
    // EMFILE and kin: leave the connection queued; the caller retries on its next poll.
    return Socket();
  }
}

long Socket::recv_some(void* data, size_t n) const {
  for (;;) {
    ssize_t k = ::recv(fd_, data, n, 0);
    if (k > 0) return static_cast<long>(k);
    if (k == 0) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

bool Socket::send_now(const void* data, size_t n) const {
  ssize_t k;
  do k = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (k < 0 && errno == EINTR);
  return k == static_cast<ssize_t>(n);
}

bool Socket::peer_closed() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLRDHUP, 0};
  int rc;
  do rc = ::poll(&p, 1, 0);
  while (rc < 0 && errno == EINTR);
  return rc > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

Address Socket::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    fail(ErrorCode::System, "getsockname failed: " + errno_text(errno));
  return from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

void Socket::send_all(const void* data, size_t n, Deadline deadline, const std::string& what) const {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_ready(fd_, POLLOUT, deadline)) fail(ErrorCode::Timeout, "timed out sending to " + what);
      continue;
    }
    fail(ErrorCode::Remote, "connection to " + what + " broke while sending (" + errno_text(errno) +
                                "): the peer failed or exited");
  }
}

void Socket::recv_all(void* data, size_t n, Deadline deadline, const std::string& what) const {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd_, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) fail(ErrorCode::Remote, what + " closed the connection: the peer failed or exited");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_ready(fd_, POLLIN, deadline)) fail(ErrorCode::Timeout, "timed out waiting for data from " + what);
      continue;
    }
    fail(ErrorCode::Remote, "connection to " + what + " broke while receiving (" + errno_text(errno) + ")");
  }
}

void exchange(const Socket& out, const void* send_data, size_t n_send, const Socket& in, void* recv_data,
              size_t n_recv, Deadline deadline, const std::string& what) {
  const char* sp = static_cast<const char*>(send_data);
  char* rp = static_cast<char*>(recv_data);
  while (n_send > 0 || n_recv > 0) {
    pollfd p[2];
    int np = 0;
    int si = -1, ri = -1;
    if (n_send > 0) { si = np; p[np++] = pollfd{out.fd(), POLLOUT, 0}; }
    if (n_recv > 0) { ri = np; p[np++] = pollfd{in.fd(), POLLIN, 0}; }
    int rc = ::poll(p, static_cast<nfds_t>(np), poll_ms(deadline));
    if (rc < 0 && errno != EINTR) fail(ErrorCode::System, "poll failed: " + errno_text(errno));
    if (rc <= 0) {
      if (Clock::now() >= deadline) {
        fail(ErrorCode::Timeout, "timed out in " + what + " (" + std::to_string(n_send) + " bytes left to send, " +
                                     std::to_string(n_recv) + " to receive)");
      }
      continue;
    }
    if (si >= 0 && p[si].revents != 0) {
      ssize_t k = ::send(out.fd(), sp, n_send, MSG_NOSIGNAL);
      if (k > 0) {
        sp += k;
        n_send -= static_cast<size_t>(k);
      } else if (!(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) {
        fail(ErrorCode::Remote, "connection broke while sending in " + what + " (" + errno_text(errno) +
                                    "): the peer failed or exited");
      }
    }
    if (ri >= 0 && p[ri].revents != 0) {
      ssize_t k = ::recv(in.fd(), rp, n_recv, 0);
      if (k > 0) {
        rp += k;
        n_recv -= static_cast<size_t>(k);
      } else if (k == 0) {
        fail(ErrorCode::Remote, "a peer closed its connection in " + what + ": it failed or exited");
      } else if (!(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        fail(ErrorCode::Remote, "connection broke while receiving in " + what + " (" + errno_text(errno) + ")");
      }
    }
  }
}

}  // namespace weft::net
