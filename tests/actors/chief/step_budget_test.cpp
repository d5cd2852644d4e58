// The chief's count of global steps in async mode, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/chief/step_budget.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(step_budget_tests)

BOOST_AUTO_TEST_CASE(step_budget_grants_exactly_last_step_updates) {
  step_budget budget(3);
  BOOST_TEST(*budget.grant(0) == 0);
  BOOST_TEST(*budget.grant(0) == 0); // asking again returns the same grant
  BOOST_TEST(*budget.grant(1) == 1);
  BOOST_TEST(*budget.grant(2) == 2);
  BOOST_TEST(!budget.grant(3).has_value()); // every step is granted
  budget.revoke_all(1);                     // worker 1 lost: its step goes back
  BOOST_TEST(*budget.grant(3) == 1);
  budget.complete(0, 0);
  budget.complete(2, 2);
  budget.complete(0, 0); // no grant held: no effect
  budget.complete(2, 1); // a step worker 2 does not hold: no effect
  BOOST_TEST(budget.global_step() == 2);
  BOOST_TEST(!budget.finished());
  budget.complete(3, 1);
  BOOST_TEST(budget.global_step() == 3);
  BOOST_TEST(budget.finished());
  BOOST_TEST(budget.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(a_lease_lets_a_worker_hold_two_steps_and_no_more) {
  step_budget budget(5, 0, 2);
  BOOST_TEST(*budget.grant(0) == 0);
  BOOST_TEST(*budget.grant(0) == 1);
  BOOST_TEST(*budget.grant(0) == 0); // a third ask: its lowest step again
  BOOST_TEST(budget.held(0) == 2u);
  BOOST_TEST(*budget.grant(1) == 2);
  budget.complete(0, 1); // steps complete in any order
  BOOST_TEST(*budget.grant(0) == 3);
  budget.revoke(0, 0); // refused: step 0 goes back, first in line
  BOOST_TEST(*budget.grant(1) == 0);
  BOOST_TEST(budget.held(1) == 2u);
  budget.revoke_all(1); // worker 1 lost with steps 0 and 2
  BOOST_TEST(budget.held(1) == 0u);
  BOOST_TEST(*budget.grant(0) == 0);
  BOOST_TEST(budget.outstanding() == 2u); // worker 0: steps 0 and 3
  for (auto step : {0, 3})
    budget.complete(0, step);
  BOOST_TEST(*budget.grant(0) == 2);
  BOOST_TEST(*budget.grant(0) == 4);
  BOOST_TEST(!budget.grant(2).has_value());
  budget.complete(0, 2);
  budget.complete(0, 4);
  BOOST_TEST(budget.global_step() == 5);
  BOOST_TEST(budget.finished());
}

BOOST_AUTO_TEST_SUITE_END()
