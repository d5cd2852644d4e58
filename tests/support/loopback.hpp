#pragma once
// A socket listening on 127.0.0.1 at a free port, for tests of code that
// connects or binds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include <boost/test/unit_test.hpp>

namespace troupe::testing {

struct loopback_listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  explicit loopback_listener(int backlog = 64) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    BOOST_REQUIRE(::listen(fd, backlog) == 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~loopback_listener() { ::close(fd); }
  loopback_listener(const loopback_listener&) = delete;
  loopback_listener& operator=(const loopback_listener&) = delete;
};

} // namespace troupe::testing
