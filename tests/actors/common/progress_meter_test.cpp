// The progress line's averages, and the join of a fan-out.
#include <boost/test/unit_test.hpp>

#include "actors/common/fan_in.hpp"
#include "actors/common/progress_meter.hpp"

using namespace troupe;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(progress_meter_tests)

BOOST_AUTO_TEST_CASE(a_line_every_interval_over_the_steps_since_the_last) {
  auto t0 = progress_meter::clock::now();
  progress_meter meter(2, t0);
  meter.add_step(1.0, 30, 100);
  BOOST_TEST(!meter.take_line(1, t0 + 1s)); // not at an interval's end
  meter.add_step(3.0, 50, 100);
  auto line = meter.take_line(2, t0 + 2s);
  BOOST_REQUIRE(line);
  BOOST_TEST(line->steps == 2);
  BOOST_TEST(line->loss == 2.0);
  BOOST_TEST(line->batch_accuracy == 0.4);
  BOOST_TEST(line->examples_per_sec == 100.0);
  BOOST_TEST(!meter.take_line(2, t0 + 3s)); // nothing added since
  meter.add_step(1.0, 1, 10);
  meter.add_sync(4.0, 1, 3);
  line = meter.take_line(4, t0 + 4s);
  BOOST_REQUIRE(line);
  BOOST_TEST(line->steps == 1);
  BOOST_TEST(line->straggler_ms == 4.0);
  BOOST_TEST(line->tokens == 3u);
  BOOST_TEST(line->examples_per_sec == 5.0); // 10 examples in the 2 s since the last line
  progress_meter off(0, t0);
  off.add_step(1, 1, 1);
  BOOST_TEST(!off.take_line(0, t0));
}

BOOST_AUTO_TEST_CASE(a_fan_in_runs_once_after_the_last_arrival) {
  int runs = 0;
  auto join = make_fan_in(3, [&] { ++runs; });
  join->arrive();
  join->arrive();
  BOOST_TEST(runs == 0);
  join->arrive();
  BOOST_TEST(runs == 1);
  join->arrive(); // a stray extra reply does not run it again
  BOOST_TEST(runs == 1);
  auto none = make_fan_in(0, [&] { ++runs; });
  BOOST_TEST(runs == 2); // nothing to wait for: at once
}

BOOST_AUTO_TEST_SUITE_END()
