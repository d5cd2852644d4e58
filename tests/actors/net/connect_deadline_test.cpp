// A blocking connect() to a peer that never answers gives up at the deadline
// (actors/net/connect_deadline.hpp). A listener whose backlog is full drops
// further SYNs, as an address with nobody behind it does.
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/connect_deadline.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

// Listens with a backlog of one and fills it: the next SYN is dropped.
struct deaf_listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int queued = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  deaf_listener() {
    auto addr = loopback(0);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    BOOST_REQUIRE(::listen(fd, 0) == 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    BOOST_REQUIRE(::connect(queued, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~deaf_listener() {
    ::close(queued);
    ::close(fd);
  }
};

struct attempt {
  int result;
  int error;
  std::chrono::milliseconds took;
  int flags_after;
};

attempt blocking_connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  auto addr = loopback(port);
  auto start = std::chrono::steady_clock::now();
  int result = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int error = errno;
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now()
                                                                    - start);
  int flags = fcntl(fd, F_GETFL);
  ::close(fd);
  return {result, error, took, flags};
}

} // namespace

BOOST_AUTO_TEST_CASE(connect_goes_through_the_interposer) {
  BOOST_TEST(connect_deadline_problem() == "");
}

BOOST_AUTO_TEST_CASE(a_connect_nobody_answers_gives_up_at_the_deadline) {
  deaf_listener deaf;
  set_connect_deadline(300ms);
  auto a = blocking_connect(deaf.port);
  set_connect_deadline(0ms);
  BOOST_TEST(a.result == -1);
  BOOST_TEST(a.error == ETIMEDOUT);
  BOOST_TEST(a.took.count() >= 250);
  BOOST_TEST(a.took.count() < 5000);             // the kernel alone retries for about two minutes
  BOOST_TEST((a.flags_after & O_NONBLOCK) == 0); // the socket is left blocking, as it was
}

BOOST_AUTO_TEST_CASE(a_connect_that_succeeds_or_is_refused_is_unchanged) {
  set_connect_deadline(300ms);
  int listening = ::socket(AF_INET, SOCK_STREAM, 0);
  auto addr = loopback(0);
  BOOST_REQUIRE(::bind(listening, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  BOOST_REQUIRE(::listen(listening, 8) == 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listening, reinterpret_cast<sockaddr*>(&addr), &len);
  auto port = ntohs(addr.sin_port);
  auto ok = blocking_connect(port);
  ::close(listening);
  auto refused = blocking_connect(port); // nobody listens there now
  set_connect_deadline(0ms);
  BOOST_TEST(ok.result == 0);
  BOOST_TEST((ok.flags_after & O_NONBLOCK) == 0);
  BOOST_TEST(refused.result == -1);
  BOOST_TEST(refused.error == ECONNREFUSED);
}
