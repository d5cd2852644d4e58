// Sync mode's worker-loss policy, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/chief/replica_policy.hpp"

using namespace troupe;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(replica_policy_tests)

BOOST_AUTO_TEST_CASE(shrink_lowers_r_to_the_workers_left_and_restores_it) {
  replica_policy p(worker_loss_policy::shrink, 2, 3); // N = 3, R = 2: one backup
  auto c = p.lost(0);
  BOOST_TEST(!c.replicas); // two workers still supply R = 2
  c = p.lost(1);
  BOOST_REQUIRE(c.replicas);
  BOOST_TEST(*c.replicas == 1);
  BOOST_TEST(c.previous == 2);
  BOOST_TEST(p.replicas() == 1);
  c = p.lost(2);
  BOOST_TEST(!c.replicas); // never below 1
  BOOST_TEST(p.replicas() == 1);
  BOOST_TEST(p.available() == 0);
  c = p.joined(1);
  BOOST_TEST(!c.replicas); // 1 available: R stays 1
  c = p.joined(0);
  BOOST_REQUIRE(c.replicas);
  BOOST_TEST(*c.replicas == 2);      // never above the configured R
  BOOST_TEST(!p.joined(5).replicas); // a worker that was not lost changes nothing
  BOOST_TEST(!c.became_short);
}

BOOST_AUTO_TEST_CASE(wait_holds_r_and_times_the_shortage) {
  replica_policy p(worker_loss_policy::wait, 2, 2);
  auto t0 = replica_policy::clock::now();
  auto c = p.lost(1, t0);
  BOOST_TEST(c.became_short);
  BOOST_TEST(!c.replicas);
  BOOST_TEST(p.replicas() == 2);
  BOOST_TEST(!p.short_for_longer_than(1000ms, t0 + 500ms));
  BOOST_TEST(p.short_for_longer_than(1000ms, t0 + 1500ms));
  c = p.joined(1, t0 + 1600ms);
  BOOST_TEST(c.enough_again);
  BOOST_TEST(!p.short_for_longer_than(1000ms, t0 + 5000ms));
  BOOST_TEST(!p.was_lost(1));
}

// Issue 29: replicas-to-aggregate = "all" follows the membership: joiners
// beyond the listed workers raise R, leavers lower it (never below 1), and
// the same worker counted twice changes nothing.
BOOST_AUTO_TEST_CASE(all_follows_the_membership_up_and_down) {
  replica_policy p(worker_loss_policy::wait, 2, 2, true); // N = 2 listed, R = "all"
  BOOST_TEST(p.replicas() == 2);
  auto c = p.joined(2);
  BOOST_REQUIRE(c.replicas);
  BOOST_TEST(*c.replicas == 3);
  BOOST_TEST(c.previous == 2);
  BOOST_TEST(*p.joined(3).replicas == 4);
  BOOST_TEST(!p.joined(3).replicas); // admitted again: no change
  BOOST_TEST(!c.became_short);       // "all" never waits
  BOOST_TEST(*p.lost(0).replicas == 3);
  BOOST_TEST(!p.lost(0).replicas); // already gone
  BOOST_TEST(*p.lost(3).replicas == 2);
  BOOST_TEST(*p.lost(2).replicas == 1);
  BOOST_TEST(!p.lost(1).replicas); // never below 1
  BOOST_TEST(p.available() == 0);
  BOOST_TEST(!p.lost(9).replicas);   // never a member
  BOOST_TEST(!p.joined(0).replicas); // 1 available: R stays at its floor of 1
  BOOST_TEST(*p.joined(1).replicas == 2);
}

BOOST_AUTO_TEST_CASE(shrink_counts_joiners_but_never_exceeds_the_configured_r) {
  replica_policy p(worker_loss_policy::shrink, 2, 2); // R = N = 2
  BOOST_TEST(!p.joined(2).replicas);                  // 3 available: R stays 2
  BOOST_TEST(!p.lost(0).replicas);                    // 2 available
  auto c = p.lost(1);                                 // 1 available
  BOOST_REQUIRE(c.replicas);
  BOOST_TEST(*c.replicas == 1);
}

BOOST_AUTO_TEST_SUITE_END()
