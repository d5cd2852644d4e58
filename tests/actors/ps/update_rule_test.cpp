// What a shard makes of each push of a step, dense gradients and rows
// together (actors/ps/update_rule.hpp), and sync mode's sums of a step's
// dense gradients (sync_accumulator.hpp).
#include <boost/test/unit_test.hpp>

#include "actors/ps/sync_accumulator.hpp"
#include "actors/ps/update_rule.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(update_rules)

// Async: a step applies once whoever pushes it again (a replay, or the
// step granted again after its worker was lost); a revoked grant is refused.
BOOST_AUTO_TEST_CASE(async_takes_each_step_once) {
  auto rule = update_rule::async();
  BOOST_TEST((rule.judge(0, 3) == push_verdict::take));
  rule.took(0, 3);
  for (int replay = 0; replay < 5; ++replay)
    BOOST_TEST((rule.judge(0, 3) == push_verdict::repeated));
  BOOST_TEST((rule.judge(1, 3) == push_verdict::repeated)); // granted again to another
  rule.revoke(2, 4);
  BOOST_TEST((rule.judge(2, 4) == push_verdict::revoked));
  BOOST_TEST((rule.judge(1, 4) == push_verdict::take)); // the step's new holder
  rule.took(1, 4);
  BOOST_TEST((rule.judge(2, 4) == push_verdict::repeated)); // in now: no refusal needed
  auto restored = update_rule::async(100);
  BOOST_TEST((restored.judge(0, 99) == push_verdict::repeated));
  BOOST_TEST((restored.judge(0, 100) == push_verdict::take));
}

// Sync: one verdict for dense gradients and rows: R distinct workers of
// the current step, stale, ahead, repeated, past the end.
BOOST_AUTO_TEST_CASE(sync_counts_r_distinct_workers_of_the_current_step) {
  auto rule = update_rule::sync(2, 0, 3);
  BOOST_TEST((rule.judge(0, 0) == push_verdict::take));
  rule.took(0, 0);
  BOOST_TEST(!rule.ready());
  BOOST_TEST((rule.judge(0, 0) == push_verdict::repeated));
  BOOST_TEST((rule.judge(1, 1) == push_verdict::ahead));
  rule.took(1, 0);
  BOOST_REQUIRE(rule.ready());
  rule.advance();
  BOOST_TEST(rule.step() == 1);
  BOOST_TEST(rule.count() == 0);
  BOOST_TEST((rule.judge(2, 0) == push_verdict::stale));
  BOOST_TEST((rule.judge(2, 3) == push_verdict::past_end));
  rule.set_required(1);
  rule.took(2, 1);
  BOOST_TEST(rule.ready());
}

BOOST_AUTO_TEST_CASE(sync_sums_average_what_was_added) {
  sync_accumulator sums({"w"});
  sums.add({tensor({2}, 2.0f)});
  sums.add({tensor({2}, 4.0f)});
  BOOST_TEST(sums.count() == 2);
  auto mean = sums.take_average();
  BOOST_TEST(mean[0][1] == 3.0f);
  BOOST_TEST(sums.count() == 0);
  sums.add({tensor({2}, 1.0f)});
  BOOST_TEST(sums.take_average()[0][0] == 1.0f);
}

BOOST_AUTO_TEST_SUITE_END()
