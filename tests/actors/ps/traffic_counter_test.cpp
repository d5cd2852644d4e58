// A shard's traffic counters, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/ps/traffic_counter.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(traffic_counter_tests)

BOOST_AUTO_TEST_CASE(bytes_are_counted_per_variable_and_in_total) {
  traffic_counter c;
  c.pulled({"w", "b"}, std::vector<tensor>{tensor({10}), tensor({2})});
  c.pushed({"w"}, {tensor({10})});
  c.pushed({"w", "b"}, {tensor({10}), tensor({2})});
  auto t = c.report(3, 48);
  BOOST_TEST(t.shard == 3);
  BOOST_TEST(t.bytes_held == 48u);
  BOOST_TEST(t.pulls == 1u);
  BOOST_TEST(t.pushes == 2u);
  BOOST_TEST(t.bytes_out == 48u);
  BOOST_TEST(t.bytes_in == 88u);
  BOOST_REQUIRE(t.variables.size() == 2u);
  BOOST_TEST(t.variables[0].name == "b"); // by name
  BOOST_TEST(t.variables[0].bytes_in == 8u);
  BOOST_TEST(t.variables[1].bytes_in == 80u);
  BOOST_TEST(t.variables[1].bytes_out == 40u);
}

BOOST_AUTO_TEST_SUITE_END()
