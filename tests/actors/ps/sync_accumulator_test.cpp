// Sync mode's gradient accumulator, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/ps/sync_accumulator.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(sync_accumulator_tests)

BOOST_AUTO_TEST_CASE(accumulator_averages_exactly_r_gradients) {
  sync_accumulator acc({"w"}, 2);
  BOOST_TEST((acc.add(0, 0, {tensor({2}, 2.0f)}) == sync_verdict::accepted));
  BOOST_TEST(!acc.ready());
  BOOST_TEST((acc.add(0, 0, {tensor({2}, 9.0f)}) == sync_verdict::duplicate));
  BOOST_TEST((acc.add(1, 1, {tensor({2}, 9.0f)}) == sync_verdict::ahead));
  BOOST_TEST((acc.add(1, 0, {tensor({2}, 4.0f)}) == sync_verdict::accepted));
  BOOST_REQUIRE(acc.ready());
  auto mean = acc.take_average();
  BOOST_TEST(mean[0][1] == 3.0f);
  BOOST_TEST(acc.step() == 1);
  BOOST_TEST((acc.add(2, 0, {tensor({2}, 1.0f)}) == sync_verdict::stale));
  BOOST_TEST(acc.dropped() == 1u); // the stale one; a duplicate is not a drop
  acc.set_required(1);
  BOOST_TEST((acc.add(2, 1, {tensor({2}, 1.0f)}) == sync_verdict::accepted));
  BOOST_TEST(acc.ready());
}

BOOST_AUTO_TEST_SUITE_END()
