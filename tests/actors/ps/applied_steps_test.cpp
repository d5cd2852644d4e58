// Async shards apply each granted step once (actors/ps/applied_steps.hpp).
#include <boost/test/unit_test.hpp>

#include "actors/ps/applied_steps.hpp"

using troupe::applied_steps;

BOOST_AUTO_TEST_SUITE(applied_steps_tests)

BOOST_AUTO_TEST_CASE(a_step_counts_once_in_any_order) {
  applied_steps steps;
  BOOST_TEST(!steps.contains(0));
  steps.add(1); // steps complete out of order
  steps.add(3);
  BOOST_TEST(steps.contains(1));
  BOOST_TEST(!steps.contains(0));
  BOOST_TEST(!steps.contains(2));
  BOOST_TEST(steps.out_of_order() == 2u);
  steps.add(0);
  BOOST_TEST(steps.out_of_order() == 1u); // 0 and 1 folded into the watermark
  steps.add(2);
  BOOST_TEST(steps.out_of_order() == 0u);
  for (int64_t s = 0; s < 4; ++s)
    BOOST_TEST(steps.contains(s));
  BOOST_TEST(!steps.contains(4));
  steps.add(1); // a repeat changes nothing
  BOOST_TEST(steps.out_of_order() == 0u);
}

BOOST_AUTO_TEST_CASE(memory_follows_the_out_of_order_steps_only) {
  applied_steps steps;
  for (int64_t s = 0; s < 100000; ++s)
    steps.add(s);
  BOOST_TEST(steps.out_of_order() == 0u);
  BOOST_TEST(steps.contains(99999));
}

BOOST_AUTO_TEST_SUITE_END()
