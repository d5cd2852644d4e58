// Sync mode's token queue, message by message on CAF's test_coordinator,
// with stand-ins for everyone who talks to it.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/token_queue/token_queue.hpp"
#include "tests/support/actors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// A token queue of run `test_run` with a chief that admits workers and logs
// summaries, shards that report updates, and workers that report steps.
struct queue_rig {
  caf::actor_system& sys;
  caf::scheduler::test_coordinator& sched;
  std::shared_ptr<std::vector<step_summary>> summaries =
    std::make_shared<std::vector<step_summary>>();
  std::shared_ptr<token_queue_actor> queue_slot = std::make_shared<token_queue_actor>();
  caf::actor chief;
  std::vector<caf::actor> shards;
  token_queue_actor queue;

  queue_rig(caf::actor_system& s, caf::scheduler::test_coordinator& sc, int32_t num_shards,
            int64_t last_step)
    : sys(s), sched(sc) {
    auto log = summaries;
    auto slot = queue_slot;
    chief = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
      return {
        [log](step_done_atom, const step_summary& x) { log->push_back(x); },
        [=](admit_atom, int32_t index, const worker_actor& w) {
          self->send(*slot, admit_atom::value, index, w);
        },
        [=](stop_atom) { self->send(*slot, stop_atom::value); },
      };
    });
    token_queue_config config{test_run, last_step, {}, 0, grant_key{}, step_receipts{}};
    for (int32_t i = 0; i < num_shards; ++i) {
      shards.push_back(sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
        return {[=](int64_t step, double ms) {
          self->send(*slot, applied_atom::value, test_run, i, step, ms);
        }};
      }));
      config.shards.push_back(shards.back().address());
    }
    queue = sys.spawn(token_queue, config, caf::actor_cast<chief_actor>(chief));
    *queue_slot = queue;
    sched.run();
  }

  // The stand-ins and the queue hold each other: end them explicitly.
  ~queue_rig() {
    *queue_slot = token_queue_actor{};
    for (auto& a : shards)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(chief, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(queue, caf::exit_reason::user_shutdown);
    sched.run();
  }

  // A worker reports `r` (admitted first by the chief, unless told not to)
  // and keeps the answer when it comes.
  grant_slot report(step_report r, bool admitted = true) {
    r.run = r.run == 0 ? test_run : r.run;
    auto slot = std::make_shared<std::optional<step_grant>>();
    auto errors = std::make_shared<int>(0);
    auto q = queue;
    auto worker = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
      return {[=](run_atom) {
        self->request(q, caf::infinite, report_atom::value, r)
          .then([=](const step_grant& g) { *slot = g; }, [=](caf::error&) { ++*errors; });
      }};
    });
    if (admitted)
      caf::anon_send(chief, admit_atom::value, r.worker, caf::actor_cast<worker_actor>(worker));
    sched.run();
    caf::anon_send(worker, run_atom::value);
    return slot;
  }

  void applied(int32_t shard, int64_t step, double ms) {
    caf::anon_send(shards[static_cast<size_t>(shard)], step, ms);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(token_queue_tests, deterministic_fixture)

// A worker that has pushed waits for its token until every shard applied
// the step; the token carries the new step. Joining workers get the
// current step at once.
BOOST_AUTO_TEST_CASE(token_comes_only_after_the_update) {
  queue_rig rig(sys, sched, 2, 5);
  auto joining = rig.report(report(0, -1, false));
  sched.run();
  BOOST_REQUIRE(joining->has_value());
  BOOST_TEST((*joining)->step == 0); // the first step is step 0, for everyone
  auto a = rig.report(report(0, 0));
  auto b = rig.report(report(1, 0));
  sched.run();
  BOOST_TEST(!a->has_value());
  BOOST_TEST(!b->has_value());
  rig.applied(0, 1, 2.0);
  sched.run();
  BOOST_TEST(!a->has_value()); // one of two shards: not yet
  rig.applied(1, 1, 3.0);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_REQUIRE(b->has_value());
  BOOST_TEST((*a)->step == 1);
  BOOST_TEST(!(*a)->stop);
  BOOST_TEST((*b)->step == 1);
  BOOST_REQUIRE(rig.summaries->size() == 1u);
  BOOST_TEST(rig.summaries->at(0).step == 1);
  BOOST_TEST(rig.summaries->at(0).tokens == 3u); // the joining token and the two released
  BOOST_TEST(rig.summaries->at(0).straggler_ms == 3.0);
  // A stale report (a backup's late gradient) is counted and answered at once.
  auto late = rig.report(report(2, 0, false));
  sched.run();
  BOOST_REQUIRE(late->has_value());
  BOOST_TEST((*late)->step == 1);
}

BOOST_AUTO_TEST_CASE(stop_releases_every_waiting_worker) {
  queue_rig rig(sys, sched, 1, 5);
  auto a = rig.report(report(0, 0));
  auto b = rig.report(report(1, 0));
  sched.run();
  BOOST_TEST(!a->has_value());
  caf::anon_send(rig.chief, stop_atom::value);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_REQUIRE(b->has_value());
  BOOST_TEST((*a)->stop);
  BOOST_TEST((*b)->stop);
  auto later = rig.report(report(0, 0));
  sched.run();
  BOOST_REQUIRE(later->has_value());
  BOOST_TEST((*later)->stop);
}

BOOST_AUTO_TEST_CASE(last_step_releases_workers_with_stop) {
  queue_rig rig(sys, sched, 1, 1);
  auto a = rig.report(report(0, 0));
  sched.run();
  rig.applied(0, 1, 1.0);
  sched.run();
  BOOST_REQUIRE(a->has_value());
  BOOST_TEST((*a)->stop);
}

// Reports only from admitted workers of this run, `applied` only from the
// run's shards, stop and admissions only from the chief: the rest is refused
// and changes nothing.
BOOST_AUTO_TEST_CASE(strangers_are_refused) {
  queue_rig rig(sys, sched, 1, 5);
  auto stranger = rig.report(report(0, 0), false); // never admitted
  auto other_run = report(1, 0);
  other_run.run = test_run + 1;
  auto foreign = rig.report(other_run);
  sched.run();
  BOOST_TEST(!stranger->has_value());
  BOOST_TEST(!foreign->has_value());
  // A stranger's `applied` and stop do not move or end the queue.
  caf::anon_send(rig.queue, applied_atom::value, test_run, int32_t{0}, int64_t{1}, 1.0);
  caf::anon_send(rig.queue, stop_atom::value);
  self->send(rig.queue, admit_atom::value, int32_t{0}, caf::actor_cast<worker_actor>(self));
  sched.run();
  auto honest = rig.report(report(0, 0));
  sched.run();
  BOOST_TEST(!honest->has_value()); // waits: no update was applied, the queue was not stopped
  BOOST_TEST(rig.summaries->empty());
  rig.applied(0, 1, 1.0);
  sched.run();
  BOOST_REQUIRE(honest->has_value());
  BOOST_TEST((*honest)->step == 1);
}

BOOST_AUTO_TEST_SUITE_END()
