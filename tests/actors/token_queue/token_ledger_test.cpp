// Sync mode's token bookkeeping, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/token_queue/token_ledger.hpp"
#include "tests/support/reports.hpp"

using namespace troupe;
using troupe::testing::report;

BOOST_AUTO_TEST_SUITE(token_ledger_tests)

BOOST_AUTO_TEST_CASE(an_update_completes_when_every_shard_reached_it) {
  token_ledger ledger(2, 10);
  auto joining = ledger.report(report(0, -1, false));
  BOOST_REQUIRE(joining); // answered at once with the current step
  BOOST_TEST(joining->step == 0);
  BOOST_TEST(!ledger.report(report(0, 0, true, 1.0))); // waits for the update
  BOOST_TEST(!ledger.report(report(1, 0, true, 3.0)));
  BOOST_TEST(ledger.applied(1, 2.0, 2).empty()); // one of two shards
  auto done = ledger.applied(1, 5.0, 2);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].step == 1);
  BOOST_TEST(done[0].loss == 2.0);
  BOOST_TEST(done[0].examples == 8u);
  BOOST_TEST(done[0].straggler_ms == 5.0); // the slowest shard
  BOOST_TEST(done[0].tokens == 3u);        // the joining token + the two released
  BOOST_TEST(ledger.grant().step == 1);
  BOOST_TEST(!ledger.grant().stop);
  // A late worker's stale report is counted as dropped and answered at once.
  auto late = ledger.report(report(2, 0, false));
  BOOST_REQUIRE(late);
  BOOST_TEST(late->step == 1);
  ledger.applied(2, 1.0, 0);
  done = ledger.applied(2, 1.0, 0);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].dropped == 1u);
}

BOOST_AUTO_TEST_CASE(updates_complete_in_order) {
  token_ledger ledger(2, 10);
  // ps:0 runs two steps ahead before ps:1 reports its first.
  BOOST_TEST(ledger.applied(1, 1.0, 0).empty());
  BOOST_TEST(ledger.applied(2, 1.0, 0).empty());
  BOOST_TEST(ledger.applied(1, 1.0, 1).size() == 1u);
  auto done = ledger.applied(2, 1.0, 0);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].step == 2);
}

BOOST_AUTO_TEST_CASE(last_step_and_stop_answer_stop) {
  token_ledger ledger(1, 1);
  BOOST_TEST(!ledger.report(report(0, 0)));
  ledger.applied(1, 1.0, 1);
  BOOST_TEST(ledger.grant().stop);
  BOOST_TEST(ledger.report(report(0, 1))->stop);
  token_ledger stopped(1, 5);
  stopped.stop();
  BOOST_TEST(stopped.report(report(0, -1, false))->stop);
}

BOOST_AUTO_TEST_SUITE_END()
