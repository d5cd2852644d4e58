// Elastic membership (issue 29) through whole clusters on CAF's
// test_coordinator: a worker beyond the listed ones joins a running job, a
// listed one leaves it; every member is told its new share of the data,
// sync's R follows the membership when asked ("all"), and the run ends ok
// with every update applied once.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

struct share_told {
  caf::abstract_actor* to;
  int32_t rank, count;
};

// What a run that grew from 2 listed workers to 3 (worker:3 joins) and then
// shrank to 2 (worker:1 leaves) showed on the way.
struct elastic_run {
  training_result result;
  std::vector<share_told> shares;     // share messages, in order
  std::optional<training_plan> plan3; // the joiner's plan
  std::vector<int32_t> replicas;      // R sent to the shard
  caf::abstract_actor *w0 = nullptr, *w1 = nullptr, *w3 = nullptr;
};

elastic_run grow_then_shrink(caf::actor_system& sys, caf::scheduler::test_coordinator& sched,
                             const training_settings& settings) {
  elastic_run out;
  runtime_settings runtime;
  runtime.max_workers = 4;
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings, spawn_mode::cooperative);
  auto chief = spawn_chief(
    sys, settings, runtime, 2, {shard}, data.test,
    [&out](const training_result& r) { out.result = r; }, spawn_mode::cooperative);
  auto worker = [&](int32_t index) {
    return spawn_worker(sys, index, 2, settings, runtime, chief, {shard}, data.train,
                        spawn_mode::cooperative);
  };
  auto w0 = worker(0), w1 = worker(1);
  out.w0 = raw(w0);
  out.w1 = raw(w1);
  worker_actor w3;
  enum { before_join, joining, left } phase = before_join;
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    auto* to = static_cast<caf::abstract_actor*>(&next);
    if (auto* element = next.mailbox().peek()) {
      auto& msg = element->content();
      if (msg.match_elements<share_atom, int32_t, int32_t>())
        out.shares.push_back({to, msg.get_as<int32_t>(1), msg.get_as<int32_t>(2)});
      if (msg.match_elements<replicas_atom, int32_t>())
        out.replicas.push_back(msg.get_as<int32_t>(1));
      bool past_step_4 = (msg.match_elements<report_atom, step_report>()
                          && msg.get_as<step_report>(1).step >= 4)
                         || (msg.match_elements<reports_atom, std::vector<step_report>>()
                             && msg.get_as<std::vector<step_report>>(1).back().step >= 4);
      if (phase == before_join && past_step_4) {
        w3 = worker(3);
        out.w3 = raw(w3);
        phase = joining;
      }
      if (phase == joining && to == out.w3 && msg.size() == 1
          && msg.match_element<training_plan>(0)) {
        out.plan3 = msg.get_as<training_plan>(0);
        sys.spawn([w1](caf::event_based_actor* self) { // as its SIGTERM relay does
          self->send(caf::actor_cast<caf::actor>(w1), leave_atom::value);
        });
        phase = left;
      }
    }
    sched.run_once();
  }
  return out;
}

bool told(const elastic_run& run, caf::abstract_actor* to, int32_t rank, int32_t count) {
  for (auto& s : run.shares)
    if (s.to == to && s.rank == rank && s.count == count)
      return true;
  return false;
}

void check_shares(const elastic_run& run) {
  BOOST_REQUIRE(run.plan3);
  // The joiner reads share 2 of 3 at once; the others from their next epoch.
  BOOST_TEST(run.plan3->share_rank == 2);
  BOOST_TEST(run.plan3->share_count == 3);
  BOOST_TEST(told(run, run.w0, 0, 3));
  BOOST_TEST(told(run, run.w1, 1, 3));
  // worker:1 left: 0 and 3 remain, halves again.
  BOOST_TEST(told(run, run.w0, 0, 2));
  BOOST_TEST(told(run, run.w3, 1, 2));
  BOOST_TEST(!told(run, run.w1, 0, 2));
  BOOST_TEST(!told(run, run.w3, 2, 3)); // its plan said so
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(chief_membership, deterministic_fixture)

BOOST_AUTO_TEST_CASE(async_a_joiner_beyond_the_list_and_a_leaver_change_the_shares) {
  auto run = grow_then_shrink(sys, sched, small_settings(60));
  BOOST_TEST(run.result.ok, run.result.error);
  BOOST_TEST(run.result.global_step == 60);
  BOOST_TEST(run.result.left_workers == 1u);
  BOOST_TEST(run.result.lost_workers == 0u);
  check_shares(run);
}

// With train.report-every the leaver's last batch goes before it ends: its
// steps count once, and it is counted as left, not lost.
BOOST_AUTO_TEST_CASE(async_batched_reports_join_and_leave_the_same_way) {
  auto settings = small_settings(60);
  settings.report_every = 4;
  auto run = grow_then_shrink(sys, sched, settings);
  BOOST_TEST(run.result.ok, run.result.error);
  BOOST_TEST(run.result.global_step == 60);
  BOOST_TEST(run.result.left_workers == 1u);
  BOOST_TEST(run.result.lost_workers == 0u);
  check_shares(run);
}

BOOST_AUTO_TEST_CASE(sync_all_follows_the_membership) {
  auto settings = sync_settings(40, 4);
  settings.replicas_follow_membership = true;
  auto run = grow_then_shrink(sys, sched, settings);
  BOOST_TEST(run.result.ok, run.result.error);
  BOOST_TEST(run.result.global_step == 40);
  BOOST_TEST(run.result.left_workers == 1u);
  check_shares(run);
  BOOST_TEST((run.replicas == std::vector<int32_t>{3, 2})); // joined, then left
}

// Without cluster.max-workers an index beyond the list is refused.
BOOST_AUTO_TEST_CASE(an_index_beyond_max_workers_is_refused) {
  auto settings = small_settings(4);
  runtime_settings runtime;
  runtime.max_workers = 3;
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings, spawn_mode::cooperative);
  training_result result;
  auto chief = spawn_chief(
    sys, settings, runtime, 1, {shard}, data.test, [&](const training_result& r) { result = r; },
    spawn_mode::cooperative);
  auto refused = ask<training_plan>(chief, ready_atom::value, int32_t{3});
  BOOST_REQUIRE(!refused);
  BOOST_TEST(describe(refused.error()).find("worker indices 0..2") != std::string::npos,
             describe(refused.error()));
  BOOST_CHECK_THROW(
    spawn_worker(sys, 3, 1, settings, runtime, chief, {shard}, data.train, spawn_mode::cooperative),
    troupe_error);
  spawn_worker(sys, 2, 1, settings, runtime, chief, {shard}, data.train, spawn_mode::cooperative);
  sched.run();
  BOOST_TEST(result.ok, result.error);
}

BOOST_AUTO_TEST_SUITE_END()
