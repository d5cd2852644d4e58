// Connections CAF never times out (actors/net/connection_warden.hpp): the
// policy, and the interposed accept() and the sweep on real sockets.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/metrics/registry.hpp"
#include "actors/net/connection_warden.hpp"
#include "tests/support/loopback.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

accepted_connection conn(int fd, std::chrono::milliseconds idle, bool cluster) {
  return accepted_connection{fd, idle, cluster, "10.0.0." + std::to_string(fd) + ":1"};
}

using listener = troupe::testing::loopback_listener;

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Whether the peer closed `fd` within `within`.
bool closed_by_peer(int fd, std::chrono::milliseconds within) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(within.count())) <= 0)
    return false;
  char byte;
  return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(connection_warden_tests)

BOOST_AUTO_TEST_CASE(silent_connections_go_and_the_limit_keeps_the_cluster) {
  warden_limits limits{1000ms, 2};
  auto verdict = judge_connections({conn(3, 5000ms, true), conn(4, 10ms, false),
                                    conn(5, 200ms, true), conn(6, 20ms, false),
                                    conn(7, 50ms, true)},
                                   limits);
  // fd 3 is silent past the timeout, even from a cluster host.
  BOOST_TEST(verdict.idle == std::vector<size_t>({0}));
  // Four remain for two places: the cluster's hosts (fds 7 and 5) stay.
  BOOST_TEST(verdict.over_limit == std::vector<size_t>({1, 3}));
}

BOOST_AUTO_TEST_CASE(nothing_goes_within_the_limits) {
  auto verdict = judge_connections({conn(3, 10ms, false), conn(4, 999ms, false)}, {1000ms, 2});
  BOOST_TEST(verdict.idle.empty());
  BOOST_TEST(verdict.over_limit.empty());
}

BOOST_AUTO_TEST_CASE(accept_goes_through_the_warden) {
  BOOST_TEST(connection_warden_problem().empty(), connection_warden_problem());
}

BOOST_AUTO_TEST_CASE(over_the_limit_a_new_connection_is_closed_at_accept) {
  listener l;
  connection_warden warden{l.port, {60000ms, 2}, {}, 20ms};
  std::vector<int> clients, accepted;
  for (int i = 0; i < 3; ++i)
    clients.push_back(connect_to(l.port));
  int accept_errno = 0;
  for (int i = 0; i < 3; ++i) {
    accepted.push_back(::accept(l.fd, nullptr, nullptr));
    accept_errno = errno;
  }
  BOOST_TEST(accepted[0] >= 0);
  BOOST_TEST(accepted[1] >= 0);
  BOOST_TEST(accepted[2] == -1);
  BOOST_TEST(accept_errno == EAGAIN);
  BOOST_TEST(!closed_by_peer(clients[0], 100ms));
  BOOST_TEST(closed_by_peer(clients[2], 1000ms));
  BOOST_TEST(accepted_connections_on(l.port, {}).size() == 2u);
  for (int fd : clients)
    ::close(fd);
  for (int fd : accepted)
    if (fd >= 0)
      ::close(fd);
}

BOOST_AUTO_TEST_CASE(a_silent_connection_is_shut_down_and_a_talking_one_kept) {
  listener l;
  connection_warden warden{l.port, {400ms, 100}, {}, 20ms};
  int silent = connect_to(l.port), talking = connect_to(l.port);
  int a = ::accept(l.fd, nullptr, nullptr), b = ::accept(l.fd, nullptr, nullptr);
  BOOST_REQUIRE(a >= 0);
  BOOST_REQUIRE(b >= 0);
  auto end = std::chrono::steady_clock::now() + 1200ms;
  while (std::chrono::steady_clock::now() < end) { // a heartbeat every 100 ms
    BOOST_REQUIRE(::send(talking, "h", 1, MSG_NOSIGNAL) == 1);
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(closed_by_peer(silent, 100ms));
  BOOST_TEST(!closed_by_peer(talking, 100ms));
  // The same in the process's metrics, labelled with the port: one refused, one open.
  auto port = std::to_string(l.port);
  auto& m = metrics::process_registry();
  BOOST_TEST(m.get_counter("troupe_refused_connections_total", "", {{"port", port}}).value() == 1u);
  BOOST_TEST(m.get_gauge("troupe_connections", "", {{"port", port}}).value() == 1.0);
  for (int fd : {silent, talking, a, b})
    ::close(fd);
}

BOOST_AUTO_TEST_CASE(other_ports_are_not_touched) {
  listener watched, other;
  connection_warden warden{watched.port, {60000ms, 0}, {}, 20ms};
  int client = connect_to(other.port);
  int fd = ::accept(other.fd, nullptr, nullptr);
  BOOST_TEST(fd >= 0);
  ::close(client);
  ::close(fd);
}

BOOST_AUTO_TEST_SUITE_END()
