// Who the chief listens to, through whole clusters on CAF's test_coordinator:
// one live worker per index, reports only from that worker and of this run,
// and a final line that says ok only when the shards applied exactly what
// the chief counted and no worker failed.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/chief/grant_desk.hpp"
#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// An actor outside the cluster asking the chief for a worker's plan; keeps
// the error it is answered with.
caf::actor ask_for_plan(caf::actor_system& sys, chief_actor chief, int32_t index,
                        std::shared_ptr<caf::error> refusal) {
  return sys.spawn([=](caf::event_based_actor* self) {
    self->request(chief, caf::infinite, ready_atom::value, index)
      .then([](const training_plan&) {}, [=](caf::error& err) { *refusal = err; });
  });
}

// The run id, read off the plan the chief sends the first worker.
template <class Observe>
run_id observe_run(caf::scheduler::test_coordinator& sched, Observe also) {
  run_id run = 0;
  run_observed(sched, [&](caf::abstract_actor* to, const caf::type_erased_tuple& msg) {
    if (run == 0 && msg.size() == 1 && msg.match_element<training_plan>(0))
      run = msg.get_as<training_plan>(0).run;
    also(to, msg, run);
  });
  return run;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(chief_admission, deterministic_fixture)

// A second start of worker 0 (while the first one answers) and a worker
// index the cluster does not have are refused; the run is unharmed.
BOOST_AUTO_TEST_CASE(a_second_worker_for_a_live_index_and_a_foreign_index_are_refused) {
  training_result result;
  auto run = cooperative_cluster(sys, small_settings(6), 1, 1, result);
  auto twin = std::make_shared<caf::error>(), foreign = std::make_shared<caf::error>();
  sched.run_once(); // the real worker's ready comes first
  ask_for_plan(sys, run.chief, 0, twin);
  ask_for_plan(sys, run.chief, 5, foreign);
  sched.run();
  BOOST_TEST(is(*twin, errc::unauthorized), caf::to_string(*twin));
  BOOST_TEST(describe(*twin).find("worker:0 is running and answers") != std::string::npos);
  BOOST_TEST(is(*foreign, errc::unauthorized));
  BOOST_TEST(describe(*foreign).find("worker indices 0..0") != std::string::npos);
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 6);
}

// A worker that crashed (its loss not noticed yet) is replaced: the chief's
// probe gets no answer from the old one, and the restarted one takes over.
BOOST_AUTO_TEST_CASE(a_restarted_worker_takes_over_from_one_that_does_not_answer) {
  auto settings = small_settings(6);
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings);
  training_result result;
  auto chief = cooperative_chief(sys, settings, 1, {shard}, data, result);
  // The "crashed" worker: registered, but it answers nothing any more.
  auto ghost = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(chief, caf::infinite, ready_atom::value, int32_t{0})
      .then([](const training_plan&) {});
    return {[](int32_t) {}}; // no hello: the chief's probe is answered with an error
  });
  sched.run();
  spawn_worker(sys, 0, 1, settings, runtime_settings{}, chief, {shard}, data.train,
               spawn_mode::cooperative);
  sched.run();
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 6);
  BOOST_TEST(result.lost_workers == 1u);
  caf::anon_send_exit(ghost, caf::exit_reason::user_shutdown);
}

// Reports claiming worker 0 from an actor that is not worker 0 are refused,
// with or without the right run id, alone or in a batch (train.report-every),
// and so are malformed batches (empty, longer than the lease, or mixing
// runs); the chief counts exactly last_step.
BOOST_AUTO_TEST_CASE(reports_from_anyone_but_the_admitted_worker_are_refused) {
  training_result result;
  auto settings = small_settings(8);
  settings.report_every = 2;
  auto run = cooperative_cluster(sys, settings, 1, 1, result);
  auto refusals = std::make_shared<int>(0);
  bool sent = false;
  observe_run(sched, [&](caf::abstract_actor*, const caf::type_erased_tuple&, run_id id) {
    if (sent || id == 0)
      return;
    sent = true;
    for (auto claimed_run : {id, id + 1}) {
      step_report fake;
      fake.run = claimed_run;
      fake.worker = 0;
      fake.step = 0;
      fake.applied = true;
      fake.examples = 1000;
      sys.spawn([=, chief = run.chief](caf::event_based_actor* self) {
        self->request(chief, caf::infinite, report_atom::value, fake)
          .then([](const step_grant&) {},
                [=](caf::error& err) {
                  if (is(err, errc::unauthorized))
                    ++*refusals;
                });
      });
      // Each batch is refused for its own reason: a stranger's whole batch
      // as a stranger's report, a malformed one before anyone is asked.
      auto mixed = fake;
      mixed.run = claimed_run + 7;
      using batch = std::vector<step_report>;
      const std::string lease = "a batch holds 1.." + std::to_string(async_step_lease(false, 2));
      const std::pair<batch, std::string> batches[] = {
        {batch{fake}, claimed_run == id ? "only the worker admitted" : "another run"},
        {batch{}, lease},
        {batch(40, fake), lease},
        {batch{fake, mixed}, "mixes workers or runs"}};
      for (auto& [reports, reason] : batches)
        sys.spawn(
          [=, chief = run.chief, reports = reports, reason = reason](caf::event_based_actor* self) {
            self->request(chief, caf::infinite, reports_atom::value, reports)
              .then([](const std::vector<step_grant>&) {},
                    [=](caf::error& err) {
                      auto why = refusal_of(err);
                      if (is(err, errc::unauthorized) && why
                          && why->message.find(reason) != std::string::npos)
                        ++*refusals;
                    });
          });
    }
  });
  BOOST_TEST(*refusals == 10);
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 8);
  BOOST_TEST(result.examples == 8u * 4u); // the fake's 1000 examples were not counted
}

// A stranger who learned the run id pushes a step the chief never granted
// (before grant proofs, the shard applied it and only the chief's
// cross-check of the shard's update count caught it): the shard refuses it,
// and the run ends ok with the refusal in its final line.
BOOST_AUTO_TEST_CASE(a_push_nobody_granted_is_refused_and_counted) {
  training_result result;
  auto run = cooperative_cluster(sys, small_settings(5), 1, 1, result);
  bool pushed = false;
  observe_run(sched, [&](caf::abstract_actor*, const caf::type_erased_tuple&, run_id id) {
    if (pushed || id == 0)
      return;
    pushed = true;
    std::vector<tensor> grads{tensor({784, 10}, 0.0f), tensor({10}, 0.0f)};
    sys.spawn([=, shard = run.shards[0]](caf::event_based_actor* self) {
      self
        ->request(
          shard, caf::infinite, push_atom::value,
          step_push{id, 0, 4242, 0, 0, names{"softmax/weights", "softmax/biases"}, grads, {}})
        .then([](const push_receipt&) {});
    });
  });
  BOOST_TEST(pushed);
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 5);
  BOOST_REQUIRE(result.traffic.size() == 1u);
  BOOST_TEST(result.traffic[0].unauthorized_pushes == 1u);
  BOOST_TEST(result.traffic[0].updates == 5);
  BOOST_TEST(result.to_json().find("\"unauthorized_pushes\":1") != std::string::npos);
}

// A worker that fails of an error of its own (a label out of range, in data
// nobody checked) cannot be part of a run that reports success, even though
// the other worker finishes the steps.
BOOST_AUTO_TEST_CASE(a_worker_failing_of_its_own_error_makes_the_run_fail) {
  auto data = synthetic_data();
  auto bad = std::make_shared<dataset>(*data.train->memory);
  bad->labels[21] = 200; // example 21: in worker 1's share (examples 20..39)
  data.train = split_in_memory(bad, "training set");
  training_result result;
  cooperative_cluster(sys, small_settings(12), 1, 2, result, data);
  sched.run();
  BOOST_TEST(!result.ok);
  BOOST_TEST(result.error.find("worker:1 failed") != std::string::npos, result.error);
  BOOST_TEST(result.global_step == 12); // worker 0 carried on
}

BOOST_AUTO_TEST_SUITE_END()
