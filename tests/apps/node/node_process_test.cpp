// The node process as a library (apps/node/): what troupe-node does around
// its task, called without starting one.
#define BOOST_TEST_MODULE node
#include <boost/test/unit_test.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <poll.h>
#include <sys/socket.h>

#include "actors/net/socket.hpp"
#include "apps/node/chief_lobby.hpp"
#include "apps/node/peers.hpp"
#include "apps/node/process.hpp"
#include "tests/support/loopback.hpp"

using namespace troupe;
using namespace troupe::node;

namespace {

node_setup two_shards() {
  node_setup setup;
  setup.cluster.ps = {{"10.0.0.1", 7001}, {"10.0.0.2", 7002}};
  setup.runtime.bulk_path = true;
  return setup;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_normal_end_exits_0_and_any_other_1) {
  BOOST_TEST(exit_code_of(caf::error{}) == exit_ok);
  BOOST_TEST(exit_code_of(caf::exit_reason::normal) == exit_ok);
  BOOST_TEST(exit_code_of(caf::exit_reason::user_shutdown) == exit_failure);
  BOOST_TEST(exit_code_of(caf::make_error(caf::sec::runtime_error)) == exit_failure);
}

BOOST_AUTO_TEST_CASE(a_task_started_twice_finds_its_address_taken) {
  node_setup setup;
  uint16_t port = 0;
  {
    testing::loopback_listener taken{1};
    port = taken.port;
    BOOST_TEST(!address_is_free(setup, {"127.0.0.1", port}));
  }
  BOOST_TEST(address_is_free(setup, {"127.0.0.1", port}));
}

// The chief's lobby holds its port while it reads its data: a connect gets
// the lobby's greeting and is closed (end of stream); the port is taken,
// for a second lobby too; close() frees it for the chief to publish on. A
// listener that says nothing is not a chief reading its data.
BOOST_AUTO_TEST_CASE(the_chief_lobby_answers_on_its_port_until_closed) {
  node_setup setup;
  uint16_t port = 0;
  {
    testing::loopback_listener probe{1};
    port = probe.port;
  }
  chief_lobby lobby({"127.0.0.1", port});
  BOOST_TEST_REQUIRE(lobby.held());
  BOOST_TEST(!address_is_free(setup, {"127.0.0.1", port}));
  BOOST_TEST(!chief_lobby({"127.0.0.1", port}).held());
  for (int i = 0; i < 3; ++i) { // each connection is closed at once: no wait
    maybe_failure error;
    auto fd = bulk::connect_to("127.0.0.1", port,
                               std::chrono::steady_clock::now() + std::chrono::seconds(2), error);
    BOOST_TEST_REQUIRE(static_cast<bool>(fd));
    std::string said;
    char buffer[256];
    for (;;) {
      pollfd p{fd.get(), POLLIN, 0};
      BOOST_TEST_REQUIRE(::poll(&p, 1, 2000) == 1);
      auto got = ::recv(fd.get(), buffer, sizeof(buffer), 0);
      if (got <= 0)
        break; // closed
      said.append(buffer, static_cast<size_t>(got));
    }
    BOOST_TEST(said == bulk::chief_lobby_greeting);
  }
  BOOST_TEST(bulk::chief_is_reading("127.0.0.1", port,
                                    std::chrono::steady_clock::now() + std::chrono::seconds(2)));
  {
    testing::loopback_listener silent{4};
    BOOST_TEST(!bulk::chief_is_reading(
      "127.0.0.1", silent.port, std::chrono::steady_clock::now() + std::chrono::milliseconds(300)));
  }
  lobby.close();
  lobby.close(); // idempotent
  BOOST_TEST(address_is_free(setup, {"127.0.0.1", port}));
  maybe_failure error;
  BOOST_TEST(!bulk::connect_to("127.0.0.1", port,
                               std::chrono::steady_clock::now() + std::chrono::seconds(2), error));
}

BOOST_AUTO_TEST_CASE(the_bulk_path_goes_to_each_shards_host_unless_off) {
  auto setup = two_shards();
  auto peers = bulk_peers_of(setup, bulk_path{true, nullptr});
  BOOST_TEST((peers.shard_hosts == std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  BOOST_TEST(bulk_peers_of(setup, bulk_path{false, nullptr}).shard_hosts.empty());
}

BOOST_AUTO_TEST_CASE(connection_limits_follow_the_connection_timeout_and_the_setting) {
  node_config cfg;
  node_setup setup;
  setup.max_connections = 64;
  auto limits = connection_limits(cfg, setup);
  BOOST_TEST(limits.max_connections == 64u);
  BOOST_TEST(limits.idle_timeout.count() == 20000); // twice CAF's default 10 s
}
