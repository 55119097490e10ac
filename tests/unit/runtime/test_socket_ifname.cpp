// Which interface the bootstrap root advertises: WEFT_SOCKET_IFNAME, and NCCL_SOCKET_IFNAME
// where the NCCL-compatible library asked for it (honour_nccl_socket_ifname).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "bootstrap/socket.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

struct Env {
  Env(const char* weft, const char* nccl) {
    weft ? setenv("WEFT_SOCKET_IFNAME", weft, 1) : unsetenv("WEFT_SOCKET_IFNAME");
    nccl ? setenv("NCCL_SOCKET_IFNAME", nccl, 1) : unsetenv("NCCL_SOCKET_IFNAME");
  }
  ~Env() {
    unsetenv("WEFT_SOCKET_IFNAME");
    unsetenv("NCCL_SOCKET_IFNAME");
  }
};

bool is_loopback(const net::Address& a) { return a.str().rfind("127.0.0.1", 0) == 0 || a.str().find("::1") != std::string::npos; }

TEST(SocketIfname, NcclNameOnlyWhereHonouredAndWeftWins) {
  {
    Env e(nullptr, "=no-such-if");  // not honoured yet: ignored
    EXPECT_NO_THROW(net::default_interface_address());
  }
  net::honour_nccl_socket_ifname();
  {
    Env e(nullptr, "=lo");
    EXPECT_TRUE(is_loopback(net::default_interface_address()));
  }
  {
    Env e(nullptr, "no-such-if,lo");  // a list of prefixes
    EXPECT_TRUE(is_loopback(net::default_interface_address()));
  }
  {
    Env e(nullptr, "=l");  // exact: "l" is no interface
    try {
      net::default_interface_address();
      FAIL();
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("NCCL_SOCKET_IFNAME='=l' matches no interface"), std::string::npos) << err.what();
    }
  }
  {
    Env e(nullptr, "^lo");  // exclusion: not supported, the default stands
    EXPECT_NO_THROW(net::default_interface_address());
  }
  {
    Env e("lo", "=no-such-if");  // WEFT_SOCKET_IFNAME first
    EXPECT_TRUE(is_loopback(net::default_interface_address()));
  }
}

}  // namespace
}  // namespace weft
