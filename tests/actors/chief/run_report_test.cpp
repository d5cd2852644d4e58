// The result of a run: its final JSON line and the traffic summary.
#include <boost/test/unit_test.hpp>

#include "actors/chief/run_report.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(run_report_tests)

BOOST_AUTO_TEST_CASE(the_final_line_says_what_happened) {
  training_result r;
  r.ok = true;
  r.mode = update_mode::sync;
  r.global_step = 12;
  r.test_accuracy = 0.83456;
  auto json = r.to_json();
  BOOST_TEST(json.find("\"event\":\"final\",\"ok\":true,\"mode\":\"sync\",\"global_step\":12,"
                       "\"test_accuracy\":0.8346")
               != std::string::npos,
             json);
  BOOST_TEST(json.find("\"error\"") == std::string::npos);
  r.ok = false;
  r.error = "lost ps:1 (\"x\"\nline)";
  json = r.to_json();
  BOOST_TEST(json.find("\"ok\":false") != std::string::npos, json);
  BOOST_TEST(json.find("\"error\":\"lost ps:1 (\\\"x\\\" line)\"}") != std::string::npos, json);
}

BOOST_AUTO_TEST_CASE(traffic_is_sorted_and_its_imbalance_measured) {
  training_result r;
  r.traffic.push_back({1, 40, 100, 100, 5, 5, 0, {{"b", 100, 100}}, 0, 0, 0, 0, 0, {}});
  r.traffic.push_back({0, 400, 300, 300, 5, 5, 0, {{"w", 300, 300}}, 0, 0, 0, 0, 0, {}});
  summarize_traffic(r);
  BOOST_TEST(r.traffic[0].shard == 0);
  BOOST_TEST(r.ps_imbalance == 1.5, boost::test_tools::tolerance(1e-12)); // 600 / mean 400
  auto json = r.traffic_json();
  BOOST_TEST(json.find("{\"shard\":0,\"bytes_held\":400,\"bytes_in\":300,\"bytes_out\":300,"
                       "\"pulls\":5,\"pushes\":5,\"variables\":{\"w\":{\"in\":300,\"out\":300}}}")
               != std::string::npos,
             json);
  auto table = traffic_table(r);
  BOOST_REQUIRE(table.size() == 5u); // title, header, 2 shards, imbalance
  BOOST_TEST(table[2].find("75.0%") != std::string::npos, table[2]);
  BOOST_TEST(table[4].find("1.500") != std::string::npos, table[4]);
}

BOOST_AUTO_TEST_SUITE_END()
