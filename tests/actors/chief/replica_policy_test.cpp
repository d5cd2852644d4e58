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

BOOST_AUTO_TEST_SUITE_END()
