// Sync mode's token queue, message by message on CAF's test_coordinator.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/token_queue/token_queue.hpp"
#include "tests/support/actors.hpp"

using namespace troupe;
using namespace troupe::testing;

BOOST_FIXTURE_TEST_SUITE(token_queue_tests, deterministic_fixture)

// A worker that has pushed waits for its token until every shard applied
// the step; the token carries the new step. Joining workers get the
// current step at once.
BOOST_AUTO_TEST_CASE(token_comes_only_after_the_update) {
  auto summaries = std::make_shared<std::vector<step_summary>>();
  auto chief_spy = sys.spawn(spy_chief, summaries);
  auto queue = sys.spawn(token_queue, token_queue_config{2, 5}, chief_spy);
  sched.run();
  auto joining = report_to(sys, queue, report(0, -1, false));
  sched.run();
  BOOST_REQUIRE(joining->has_value());
  BOOST_TEST((*joining)->step == 0); // the first step is step 0, for everyone
  auto a = report_to(sys, queue, report(0, 0));
  auto b = report_to(sys, queue, report(1, 0));
  sched.run();
  BOOST_TEST(!a->has_value());
  BOOST_TEST(!b->has_value());
  caf::anon_send(queue, applied_atom::value, int32_t{0}, int64_t{1}, 2.0);
  sched.run();
  BOOST_TEST(!a->has_value()); // one of two shards: not yet
  caf::anon_send(queue, applied_atom::value, int32_t{1}, int64_t{1}, 3.0);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_REQUIRE(b->has_value());
  BOOST_TEST((*a)->step == 1);
  BOOST_TEST(!(*a)->stop);
  BOOST_TEST((*b)->step == 1);
  BOOST_REQUIRE(summaries->size() == 1u);
  BOOST_TEST(summaries->at(0).step == 1);
  BOOST_TEST(summaries->at(0).tokens == 3u); // the joining token and the two released
  BOOST_TEST(summaries->at(0).straggler_ms == 3.0);
  // A stale report (a backup's late gradient) is counted and answered at once.
  auto late = report_to(sys, queue, report(2, 0, false));
  sched.run();
  BOOST_REQUIRE(late->has_value());
  BOOST_TEST((*late)->step == 1);
}

BOOST_AUTO_TEST_CASE(stop_releases_every_waiting_worker) {
  auto summaries = std::make_shared<std::vector<step_summary>>();
  auto chief_spy = sys.spawn(spy_chief, summaries);
  auto queue = sys.spawn(token_queue, token_queue_config{1, 5}, chief_spy);
  sched.run();
  auto a = report_to(sys, queue, report(0, 0));
  auto b = report_to(sys, queue, report(1, 0));
  sched.run();
  BOOST_TEST(!a->has_value());
  caf::anon_send(queue, stop_atom::value);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_REQUIRE(b->has_value());
  BOOST_TEST((*a)->stop);
  BOOST_TEST((*b)->stop);
  auto later = report_to(sys, queue, report(0, 0));
  sched.run();
  BOOST_REQUIRE(later->has_value());
  BOOST_TEST((*later)->stop);
}

BOOST_AUTO_TEST_CASE(last_step_releases_workers_with_stop) {
  auto summaries = std::make_shared<std::vector<step_summary>>();
  auto chief_spy = sys.spawn(spy_chief, summaries);
  auto queue = sys.spawn(token_queue, token_queue_config{1, 1}, chief_spy);
  sched.run();
  auto a = report_to(sys, queue, report(0, 0));
  sched.run();
  caf::anon_send(queue, applied_atom::value, int32_t{0}, int64_t{1}, 1.0);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_TEST((*a)->stop);
}

BOOST_AUTO_TEST_SUITE_END()
