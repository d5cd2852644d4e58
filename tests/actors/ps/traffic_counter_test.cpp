// A shard's traffic counters, without CAF.
#include <memory>

#include <boost/test/unit_test.hpp>

#include "actors/ps/traffic_counter.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(traffic_counter_tests)

BOOST_AUTO_TEST_CASE(bytes_are_counted_per_variable_and_in_total) {
  traffic_counter c{90}; // shard 90: its metrics are this test's own
  std::vector<std::shared_ptr<const tensor>> pulled{std::make_shared<tensor>(shape_t{10}),
                                                    std::make_shared<tensor>(shape_t{2})};
  c.pulled({"w", "b"}, pulled, 0, 0);
  c.pushed(step_push{1, 0, 0, 0, 0, {"w"}, {tensor({10})}, {}});
  c.pushed(step_push{1, 0, 1, 0, 0, {"w", "b"}, {tensor({10}), tensor({2})}, {}});
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
  // The same counts in the process's metrics, labelled with the shard.
  auto text = metrics::process_registry().render();
  BOOST_TEST(text.find("troupe_shard_pulls_total{shard=\"90\"} 1\n") != std::string::npos);
  BOOST_TEST(text.find("troupe_shard_pushes_total{shard=\"90\"} 2\n") != std::string::npos);
  BOOST_TEST(text.find("troupe_shard_sent_bytes_total{shard=\"90\"} 48\n") != std::string::npos);
  BOOST_TEST(text.find("troupe_shard_received_bytes_total{shard=\"90\"} 88\n")
             != std::string::npos);
}

// A step's rows count in the same push and pull as its dense values.
BOOST_AUTO_TEST_CASE(rows_count_in_the_request_that_carries_them) {
  traffic_counter c{91};
  std::vector<std::shared_ptr<const tensor>> none;
  c.pulled({}, none, 3, 24);
  c.pushed(step_push{1, 0, 0, 0, 0, {}, {}, {{0, {1, 2}, {1, 1}, tensor({2, 2})}}});
  c.repeated_push();
  auto t = c.report(0, 0);
  BOOST_TEST(t.pulls == 1u);
  BOOST_TEST(t.row_pulls == 1u);
  BOOST_TEST(t.keys_pulled == 3u);
  BOOST_TEST(t.bytes_out == 24u);
  BOOST_TEST(t.pushes == 1u);
  BOOST_TEST(t.row_pushes == 1u);
  BOOST_TEST(t.keys_pushed == 2u);
  BOOST_TEST(t.bytes_in == 16u);
  BOOST_TEST(t.repeated_pushes == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
