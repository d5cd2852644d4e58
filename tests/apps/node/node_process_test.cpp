// The node process as a library (apps/node/): what troupe-node does around
// its task, called without starting one.
#define BOOST_TEST_MODULE node
#include <boost/test/unit_test.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>

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
