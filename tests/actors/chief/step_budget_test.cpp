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
  budget.revoke(1);                         // worker 1 lost: its step goes back
  BOOST_TEST(*budget.grant(3) == 1);
  budget.complete(0);
  budget.complete(2);
  budget.complete(0); // no grant held: no effect
  BOOST_TEST(budget.global_step() == 2);
  BOOST_TEST(!budget.finished());
  budget.complete(3);
  BOOST_TEST(budget.global_step() == 3);
  BOOST_TEST(budget.finished());
  BOOST_TEST(budget.outstanding() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
