// Async mode's grants, waiting workers and refusals, without CAF.
#include <map>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/chief/grant_desk.hpp"
#include "tests/support/reports.hpp"

using namespace troupe;
using troupe::testing::report;

namespace {

// Stands in for a response promise: records what the worker was answered.
struct recorded_reply {
  std::shared_ptr<std::vector<step_grant>> log = std::make_shared<std::vector<step_grant>>();
  void deliver(step_grant g) { log->push_back(g); }
};

using desk = grant_desk<recorded_reply>;

} // namespace

BOOST_AUTO_TEST_SUITE(grant_desk_tests)

// Issue 52: a worker that held a step and reported nothing, while still
// connected, held up a checkpoint's fence and the end of the run until
// every task timed out. Its lease expires: its steps go to a waiting
// worker, the fence goes through, and its late report counts nothing.
BOOST_AUTO_TEST_CASE(a_lease_held_too_long_goes_to_another_worker) {
  auto now = std::make_shared<desk::clock::time_point>();
  desk d(4, 10, 0, 2, {}, staleness_bound::unbounded(), [now] { return *now; });
  using std::chrono::seconds;
  BOOST_TEST(d.report(report(1, -1, false)).step == 0); // worker 1 holds 0 and 1
  BOOST_TEST(d.report(report(1, -1, false)).step == 1);
  BOOST_TEST(d.report(report(0, -1, false)).step == 2); // worker 0 holds 2 and 3
  BOOST_TEST(d.report(report(0, -1, false)).step == 3);
  *now += seconds(30);
  BOOST_TEST(d.expire(seconds(60)).empty()); // nobody silent for a minute yet
  d.report(report(0, 2));                    // worker 0 goes on; the budget is granted out
  auto parked = d.report(report(0, 3));
  BOOST_REQUIRE((parked.what == desk::outcome::waiting));
  recorded_reply reply;
  d.park(0, reply);
  d.hold(); // a checkpoint's fence, waiting for worker 1's steps
  BOOST_TEST(!d.quiescent());
  *now += seconds(31);
  auto expired = d.expire(seconds(60));
  BOOST_REQUIRE(expired.size() == 1u);
  BOOST_TEST(expired[0].worker == 1);
  BOOST_TEST(expired[0].steps == (std::vector<int64_t>{0, 1}));
  BOOST_TEST((expired[0].silent == seconds(61)));
  BOOST_TEST(d.quiescent()); // the fence goes through
  d.resume();
  BOOST_REQUIRE(reply.log->size() == 1u); // the waiting worker gets a step taken back
  BOOST_TEST(reply.log->at(0).step == 0);
  // The slow worker's late report of it counts nothing; the new holder's does.
  BOOST_TEST(!d.report(report(1, 0)).completed);
  BOOST_TEST(d.report(report(0, 0)).completed);
  BOOST_TEST(d.global_step() == 3);
}

// Issue 55: a worker following a directory with no data yet gives back
// the steps it holds unstarted: a checkpoint's fence goes through at once,
// a waiting worker gets them, nothing counts as refused, and a step the
// worker does not hold (or no longer) is not taken from anyone.
BOOST_AUTO_TEST_CASE(a_step_given_back_unstarted_goes_to_another_without_a_refusal) {
  desk d(4, 10, 0, 2);                                  // leases of two steps
  BOOST_TEST(d.report(report(1, -1, false)).step == 0); // worker 1 holds 0 and 1
  BOOST_TEST(d.report(report(1, -1, false)).step == 1);
  BOOST_TEST(d.report(report(0, -1, false)).step == 2); // worker 0 holds 2 and 3
  BOOST_TEST(d.report(report(0, -1, false)).step == 3);
  d.report(report(0, 2));
  auto parked = d.report(report(0, 3));
  BOOST_REQUIRE((parked.what == desk::outcome::waiting));
  recorded_reply reply;
  d.park(0, reply);
  d.hold(); // a checkpoint's fence, waiting for worker 1's steps
  BOOST_TEST(!d.quiescent());
  BOOST_TEST(!d.give_back(1, 7)); // not its step
  BOOST_TEST(!d.give_back(0, 0)); // not worker 0's
  BOOST_TEST(d.give_back(1, 0));
  BOOST_TEST(d.give_back(1, 1));
  BOOST_TEST(!d.give_back(1, 1)); // once
  BOOST_TEST(d.quiescent());      // the fence goes through
  d.resume();
  BOOST_REQUIRE(reply.log->size() == 1u); // the waiting worker gets a step given back
  BOOST_TEST(reply.log->at(0).step == 0);
  BOOST_TEST(d.refused() == 0);
  auto next = d.report(report(0, 0));
  BOOST_TEST(next.completed);
  BOOST_TEST(next.step == 1); // the other step given back
  // Worker 1 asks again once its data came: every step is granted.
  BOOST_TEST((d.report(report(1, -1, false)).what == desk::outcome::waiting));
  BOOST_TEST((d.report(report(0, 1)).what == desk::outcome::finished));
  BOOST_TEST(d.global_step() == 4);
}

BOOST_AUTO_TEST_CASE(reports_complete_grants_and_hand_out_the_next) {
  desk d(3, 10);
  auto a = d.report(report(0, -1, false)); // joining
  BOOST_TEST((a.what == desk::outcome::granted));
  BOOST_TEST(a.step == 0);
  BOOST_TEST(!a.completed);
  a = d.report(report(0, 0));
  BOOST_TEST(a.completed);
  BOOST_TEST(a.step == 1);
  BOOST_TEST(d.global_step() == 1);
  // A report for a step the worker does not hold counts nothing.
  a = d.report(report(1, 7));
  BOOST_TEST(!a.completed);
  BOOST_TEST(a.step == 2);
  BOOST_TEST((d.report(report(0, 1)).what == desk::outcome::waiting)); // step 2 held by worker 1
  a = d.report(report(1, 2));
  BOOST_TEST((a.what == desk::outcome::finished));
  BOOST_TEST(d.finished());
}

BOOST_AUTO_TEST_CASE(a_waiting_worker_gets_a_revoked_step_at_once) {
  desk d(2, 10);
  d.report(report(0, -1, false)); // step 0
  d.report(report(1, -1, false)); // step 1
  auto a = d.report(report(2, -1, false));
  BOOST_REQUIRE((a.what == desk::outcome::waiting));
  recorded_reply reply;
  d.park(2, reply);
  BOOST_TEST(d.waiting() == 1u);
  d.lose(1); // worker 1 gone with step 1
  BOOST_REQUIRE(reply.log->size() == 1u);
  BOOST_TEST(reply.log->at(0).step == 1);
  BOOST_TEST(!reply.log->at(0).stop);
  BOOST_TEST(d.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(refused_updates_are_granted_again_then_the_run_diverges) {
  desk d(5, 2);
  d.report(report(0, -1, false));
  auto a = d.report(report(0, 0, false)); // refused: step 0 again
  BOOST_TEST((a.what == desk::outcome::granted));
  BOOST_TEST(a.step == 0);
  BOOST_TEST(d.refused() == 1);
  d.report(report(0, 0, false));
  BOOST_TEST((d.report(report(0, 0, false)).what == desk::outcome::diverged));
  BOOST_TEST(d.refused() == 3);
  BOOST_TEST(d.global_step() == 0);
}

BOOST_AUTO_TEST_CASE(the_end_releases_every_waiting_worker_with_stop) {
  desk d(1, 10);
  d.report(report(0, -1, false));
  recorded_reply one, two;
  BOOST_REQUIRE((d.report(report(1, -1, false)).what == desk::outcome::waiting));
  d.park(1, one);
  BOOST_REQUIRE((d.report(report(2, -1, false)).what == desk::outcome::waiting));
  d.park(2, two);
  d.release_all();
  BOOST_REQUIRE(one.log->size() == 1u);
  BOOST_TEST(one.log->at(0).stop);
  BOOST_TEST(two.log->at(0).stop);
  BOOST_TEST(d.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(leased_steps_count_exactly_last_step_and_a_loss_returns_both) {
  desk d(4, 10, 0, 2);
  // Each worker asks twice at the start and holds two steps.
  BOOST_TEST(d.report(report(0, -1, false)).step == 0);
  BOOST_TEST(d.report(report(0, -1, false)).step == 1);
  BOOST_TEST(d.report(report(1, -1, false)).step == 2);
  BOOST_TEST(d.report(report(1, -1, false)).step == 3);
  // Worker 0 reports step 1 before step 0 (its reports overlap its steps).
  auto a = d.report(report(0, 1));
  BOOST_TEST(a.completed);
  BOOST_REQUIRE((a.what == desk::outcome::waiting)); // every step is held
  recorded_reply parked;
  d.park(0, parked);
  // Worker 1 is lost holding steps 2 and 3: the waiting ask gets one at
  // once, the next ask of worker 0 the other.
  d.lose(1);
  BOOST_REQUIRE(parked.log->size() == 1u);
  BOOST_TEST(parked.log->at(0).step == 2);
  a = d.report(report(0, 0));
  BOOST_TEST(a.completed);
  BOOST_TEST(a.step == 3);
  for (auto step : {2, 3})
    a = d.report(report(0, step));
  BOOST_TEST((a.what == desk::outcome::finished));
  BOOST_TEST(d.global_step() == 4);
  // A report of a step already counted counts nothing.
  BOOST_TEST(!d.report(report(0, 3)).completed);
}

// SSP (train.mode = "ssp"): the bound as a plain class.
BOOST_AUTO_TEST_CASE(a_staleness_bound_holds_back_whoever_runs_ahead_of_the_slowest) {
  staleness_bound b(1);
  b.enroll(0);
  b.enroll(1);
  BOOST_TEST(b.may_start(0));
  b.started(0);
  b.completed(0);             // worker 0: 1 done, worker 1: 0
  BOOST_TEST(b.may_start(0)); // started 1 <= slowest 0 + 1
  b.started(0);
  BOOST_TEST(!b.may_start(0)); // started 2 > 0 + 1
  BOOST_TEST(b.may_start(1));
  b.started(1);
  b.completed(1);
  BOOST_TEST(b.may_start(0)); // slowest is 1 now
  b.revoked(0);               // the step it started went back
  BOOST_TEST(b.slowest() == 1);
  // A newcomer starts at the slowest clock; a worker that leaves no longer
  // holds anyone back.
  b.enroll(2);
  BOOST_TEST(b.slowest() == 1);
  b.leave(1);
  b.leave(2);
  b.started(0);
  b.started(0);
  BOOST_TEST(!b.may_start(0)); // started 3 > its own 1 done + 1
  BOOST_TEST(staleness_bound::unbounded().may_start(0));
}

BOOST_AUTO_TEST_CASE(ssp_with_staleness_0_keeps_the_workers_in_lockstep) {
  // Two workers, a lease of two (async's), staleness 0: a worker gets step
  // k+1 only once every worker finished k; a parked ask is answered when the
  // slowest catches up.
  desk d(10, 10, 0, 2, {}, staleness_bound(0));
  d.enroll(0);
  d.enroll(1);
  auto a0 = d.report(report(0, -1, false));
  BOOST_REQUIRE((a0.what == desk::outcome::granted));
  auto second = d.report(report(0, -1, false)); // its lease's second ask
  BOOST_REQUIRE((second.what == desk::outcome::waiting));
  recorded_reply parked;
  d.park(0, parked);
  auto a1 = d.report(report(1, -1, false));
  BOOST_REQUIRE((a1.what == desk::outcome::granted));
  // Worker 0 finishes its first step: worker 1 has not, so 0 waits.
  auto done0 = d.report(report(0, a0.step));
  BOOST_TEST(done0.completed);
  BOOST_TEST((done0.what == desk::outcome::waiting));
  BOOST_TEST(parked.log->empty());
  recorded_reply parked2;
  d.park(0, parked2);
  // Worker 1 finishes: both clocks are 1, worker 0's parked ask goes on
  // (one: with staleness 0 it may hold one step), and worker 1 gets its next.
  auto done1 = d.report(report(1, a1.step));
  BOOST_TEST(done1.completed);
  BOOST_TEST((done1.what == desk::outcome::granted));
  BOOST_TEST(parked.log->size() + parked2.log->size() == 1u);
  BOOST_TEST(d.waiting() == 1u);
  BOOST_TEST(d.global_step() == 2);
}

BOOST_AUTO_TEST_CASE(ssp_lets_a_worker_run_at_most_s_steps_ahead_and_a_lost_one_frees_it) {
  desk d(100, 10, 0, 1, {}, staleness_bound(2));
  d.enroll(0);
  d.enroll(1);
  auto slow = d.report(report(1, -1, false)); // worker 1 holds its first step, never reports
  BOOST_REQUIRE((slow.what == desk::outcome::granted));
  auto a = d.report(report(0, -1, false));
  int finished = 0;
  while (a.what == desk::outcome::granted) {
    a = d.report(report(0, a.step));
    finished += a.completed ? 1 : 0;
  }
  // Worker 1 sits at 0 done: worker 0 may start a step while it is at most
  // 2 ahead (Bosen's rule, checked when a step starts), so it completes 3
  // and waits for a fourth.
  BOOST_TEST(finished == 3);
  BOOST_TEST((a.what == desk::outcome::waiting));
  recorded_reply parked;
  d.park(0, parked);
  d.lose(1); // the slow worker is gone: worker 0 goes on at once
  BOOST_REQUIRE(parked.log->size() == 1u);
  BOOST_TEST(!parked.log->at(0).stop);
}

// train.report-every: a lease of 5 here (async_step_lease(false, 4) gives
// 8), filled by one answer per batch of reports.
BOOST_AUTO_TEST_CASE(a_batch_of_reports_completes_each_step_and_fills_the_lease_again) {
  BOOST_REQUIRE(async_step_lease(false, 4) == 8);
  desk d(14, 10, 0, 5);
  auto a = d.fill(0); // the first ask fills the whole lease at once
  BOOST_TEST((a.what == desk::outcome::granted));
  BOOST_TEST(a.steps == (std::vector<int64_t>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(d.fill(1).steps.size() == 5u); // 5..9
  // Worker 0 reports 4 steps in one batch, one of them a refused update:
  // three count, the refused one goes back and is granted again first.
  BOOST_TEST((d.settle(report(0, 0)) == desk::settled::completed));
  BOOST_TEST((d.settle(report(0, 1)) == desk::settled::completed));
  BOOST_TEST((d.settle(report(0, 2, false)) == desk::settled::revoked));
  BOOST_TEST((d.settle(report(0, 3)) == desk::settled::completed));
  BOOST_TEST((d.settle(report(0, 3)) == desk::settled::nothing)); // counted already
  BOOST_TEST(d.global_step() == 3);
  // It holds step 4; 5 steps not granted (2, 10..13) over 2 workers: it
  // may hold 3, the revoked step first.
  a = d.fill(0);
  BOOST_TEST(a.steps == (std::vector<int64_t>{2, 10}), boost::test_tools::per_element());
  // A fence: no new steps; a worker that still holds steps gets none and
  // goes on, one that holds none waits.
  d.hold();
  for (auto step : {5, 6, 7, 8})
    d.settle(report(1, step));
  a = d.fill(1);
  BOOST_TEST((a.what == desk::outcome::granted));
  BOOST_TEST(a.steps.empty());
  d.settle(report(1, 9));
  BOOST_TEST((d.fill(1).what == desk::outcome::waiting));
  for (auto step : {2, 4, 10})
    d.settle(report(0, step));
  BOOST_TEST(d.quiescent());
  d.resume();
  a = d.fill(0);
  BOOST_TEST(a.steps == (std::vector<int64_t>{11, 12, 13}), boost::test_tools::per_element());
  for (auto step : {11, 12, 13})
    d.settle(report(0, step));
  BOOST_TEST(d.global_step() == 14);
  BOOST_TEST((d.fill(0).what == desk::outcome::finished));
}

// As the steps not granted run out, a worker holds at most its share of
// them, so that no worker is left computing a whole lease at the end.
BOOST_AUTO_TEST_CASE(near_the_end_a_fill_gives_no_more_than_a_fair_share) {
  desk d(24, 10, 0, 10);
  BOOST_TEST(d.fill(0).steps.size() == 10u); // 0..9: 24 not granted, one worker
  BOOST_TEST(d.fill(1).steps.size() == 7u);  // 10..16: 14 over two
  for (int64_t step = 0; step < 16; ++step)
    d.settle(report(step < 10 ? 0 : 1, step));
  // 7 not granted (17..23) over 2 workers: worker 0 may hold 4; then 3
  // over 2, and worker 1, holding 16, gets 1 more.
  auto a = d.fill(0);
  BOOST_TEST(a.steps == (std::vector<int64_t>{17, 18, 19, 20}), boost::test_tools::per_element());
  a = d.fill(1);
  BOOST_TEST(a.steps == (std::vector<int64_t>{21}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_batch_past_the_refusal_limit_diverges) {
  desk d(10, 1, 0, async_step_lease(false, 2));
  d.fill(0);
  BOOST_TEST((d.settle(report(0, 0, false)) == desk::settled::revoked));
  BOOST_TEST((d.settle(report(0, 1, false)) == desk::settled::diverged));
}

BOOST_AUTO_TEST_SUITE_END()
