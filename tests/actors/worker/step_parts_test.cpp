// The worker's plain parts without an actor: the steps it holds
// (step_lease), its wait for a lost peer (recovery_wait), where values and
// gradients live (param_buffers), and one
// step between grant and report (step_pipeline), plain and with
// pull-ahead, over a message path whose replies the test hands in.
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/worker/param_buffers.hpp"
#include "actors/worker/recovery_wait.hpp"
#include "actors/worker/report_batch.hpp"
#include "actors/worker/step_lease.hpp"
#include "actors/worker/step_pipeline.hpp"
#include "tests/support/step_events.hpp"

using namespace troupe;

namespace {

// Two variables: "a" whole on shard 0, "b" split in two rows over shards 0 and 1.
std::vector<variable_spec> part_variables() {
  return {{"a", {2}, {}}, {"b", {2, 2}, {}}};
}

std::vector<planned_slice> part_plan() {
  return {{"a", 0, 0, 0, 0, 2}, {"b/part_0", 0, 1, 0, 0, 1}, {"b/part_1", 1, 1, 0, 1, 1}};
}

// Requests wait for the test's answer, as replies wait in a mailbox.
struct fake_step_messages : message_path {
  struct request {
    int32_t shard;
    bool push;
    int64_t step;
    pull_done pulled;
    push_done pushed;
  };
  std::vector<request> requests;
  float value = 1.0f; // what every pulled float is

  void pull(int32_t shard, pull_request, pull_done done) override {
    requests.push_back({shard, false, -1, std::move(done), {}});
  }
  void push(int32_t shard, step_push push, push_done done) override {
    requests.push_back({shard, true, push.step, {}, std::move(done)});
  }
  void fetch(int32_t shard, uint64_t, const copy_tensor&, pull_done done) override {
    requests.push_back({shard, false, -1, std::move(done), {}});
  }
  // Answers every open request in order: pulls with `value`, pushes as
  // applied with the receipt 10 + the shard (or with `refusal`).
  void answer_all(maybe_failure refusal = std::nullopt) {
    auto open = std::move(requests);
    requests.clear();
    for (auto& r : open) {
      if (r.push) {
        r.pushed({1, 10 + static_cast<uint64_t>(r.shard)}, refusal, std::nullopt);
        continue;
      }
      pull_reply reply;
      if (r.shard == 0)
        reply.values = {tensor{{2}, value}, tensor{{1, 2}, value}};
      else
        reply.values = {tensor{{1, 2}, value}};
      r.pulled(reply, std::nullopt, std::nullopt);
    }
  }
};

struct parts_fixture : troupe::testing::step_events {
  fake_step_messages basp;
  shard_exchange exchange{basp, std::chrono::seconds(5)};
  slice_router router{part_plan(), part_variables(), 2};
  param_buffers buffers;

  std::unique_ptr<step_pipeline> pipeline(bool pull_ahead) {
    exchange.reset_links(2);
    buffers.reset(router, nullptr, 2);
    auto out = std::make_unique<step_pipeline>(exchange, buffers, "worker:0", pull_ahead, hooks());
    out->reset(router);
    return out;
  }

  // The worker computed: gradients of the right shapes.
  void compute_gradients() {
    buffers.grads()[0] = tensor{{2}, 0.1f};
    buffers.grads()[1] = tensor{{2, 2}, 0.1f};
  }

  step_report report_of(int64_t step) {
    step_report r;
    r.step = step;
    return r;
  }

  // A plain pipeline whose step 3 (grant 7) was pulled, computed and pushed:
  // what happens next is up to the push's answer.
  std::unique_ptr<step_pipeline> pushed_step() {
    auto p = pipeline(false);
    p->begin(7);
    basp.answer_all();
    compute_gradients();
    p->computed({7, 0, 3, 0}, report_of(3), true);
    return p;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(step_lease_tests)

BOOST_AUTO_TEST_CASE(one_step_under_way_the_next_held_and_only_the_latest_end_counts) {
  step_lease lease;
  lease.reset(2);
  BOOST_TEST(lease.size() == 2);
  BOOST_TEST(!lease.begin()); // nothing granted
  lease.grant({4, false, 1});
  lease.grant({5, false, 2});
  auto first = lease.begin();
  BOOST_REQUIRE(first);
  BOOST_TEST(first->step == 4);
  BOOST_TEST(!lease.begin()); // one under way
  auto stale_end = lease.end();
  auto latest_end = lease.end();
  BOOST_TEST(!lease.latest(stale_end));
  BOOST_TEST(lease.latest(latest_end));
  BOOST_TEST(lease.begin()->step == 5);
  lease.reset(0); // a new plan: nothing held, at least one asked for
  BOOST_TEST(lease.size() == 1);
  BOOST_TEST(!lease.busy());
  BOOST_TEST(lease.holds_none());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_batch_tests)

BOOST_AUTO_TEST_CASE(reports_go_when_the_batch_is_full_or_the_worker_would_run_dry) {
  report_batch batch;
  batch.reset(1);
  BOOST_TEST(!batch.batched());
  batch.reset(3);
  BOOST_TEST(batch.batched());
  step_report r;
  for (int64_t step : {4, 7}) {
    r.step = step;
    BOOST_TEST(!batch.add(r, 10)); // 10 steps still to start
  }
  r.step = 9;
  BOOST_TEST(batch.add(r, 10)); // full
  auto sent = batch.take();
  BOOST_REQUIRE(sent.size() == 3u);
  BOOST_TEST(sent[0].step == 4); // in the order computed
  BOOST_TEST(sent[2].step == 9);
  BOOST_TEST(batch.empty());
  r.step = 10;
  BOOST_TEST(!batch.add(r, 2));
  BOOST_TEST(batch.add(r, 2)); // as many reports as steps left to start: it goes
  batch.take();
  BOOST_TEST(batch.add(r, 0)); // nothing else held: at once
  batch.reset(3);              // a new plan voids what is pending
  BOOST_TEST(batch.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(recovery_wait_tests)

BOOST_AUTO_TEST_CASE(each_failure_voids_what_was_in_flight_but_only_the_first_starts_the_wait) {
  using namespace std::chrono_literals;
  recovery_wait wait{100ms};
  auto t0 = recovery_wait::clock::now();
  auto asked = wait.generation();
  BOOST_TEST(!wait.waiting());
  BOOST_TEST(wait.begin(t0));
  BOOST_TEST(!wait.current(asked)); // an answer asked for before the loss is void
  auto asked_while_waiting = wait.generation();
  BOOST_TEST(!wait.begin(t0 + 50ms)); // a second failure while waiting
  BOOST_TEST(!wait.current(asked_while_waiting));
  BOOST_TEST(!wait.expired(t0 + 99ms)); // the limit counts from the first
  BOOST_TEST(wait.expired(t0 + 100ms));
  wait.over();
  BOOST_TEST(!wait.waiting());
  BOOST_TEST(!wait.expired(t0 + 1h));
  auto fresh = wait.generation();
  wait.void_in_flight(); // a restored plan
  BOOST_TEST(!wait.current(fresh));
}

BOOST_AUTO_TEST_CASE(lost_shards_are_reached_again_once_in_the_order_lost) {
  recovery_wait wait;
  wait.lost_shard(2);
  wait.lost_shard(0);
  BOOST_TEST(wait.take_lost_shards() == (std::vector<int32_t>{2, 0}));
  BOOST_TEST(wait.take_lost_shards().empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(param_buffers_tests, parts_fixture)

BOOST_AUTO_TEST_CASE(a_whole_variable_is_pulled_into_its_own_storage) {
  buffers.reset(router, nullptr, 2);
  buffers.params()[0] = tensor{{2}, 0.0f};
  const float* storage = buffers.params()[0].data();
  auto& part = router.parts()[0];
  auto lent = buffers.lend(part);
  BOOST_TEST(lent[0].data() == storage); // "a" lends its tensor
  BOOST_TEST(lent[1].size() == 0u);      // a slice of "b" is copied: nothing lent
  std::vector<tensor> values;            // not an initializer list: it would copy
  values.push_back(std::move(lent[0]));
  values.push_back(tensor{{1, 2}, 3.0f});
  values[0].data()[0] = 2.0f;
  BOOST_TEST(!buffers.take(part, values));
  BOOST_TEST(buffers.params()[0].data() == storage);
  BOOST_TEST(buffers.params()[0].data()[0] == 2.0f);
  BOOST_TEST(buffers.params()[1].data()[0] == 3.0f); // row 0 of "b"
}

BOOST_AUTO_TEST_CASE(a_pull_that_does_not_fit_the_plan_is_an_error_not_a_throw) {
  buffers.reset(router, nullptr, 2);
  std::vector<tensor> wrong{tensor{{3}, 1.0f}};
  auto err = buffers.take(router.parts()[0], wrong);
  BOOST_TEST(err.has_value());
}

BOOST_AUTO_TEST_CASE(values_pulled_ahead_hand_the_previous_storage_back) {
  buffers.reset(router, nullptr, 2);
  buffers.params()[0] = tensor{{2}, 0.0f};
  buffers.params()[1] = tensor{{2, 2}, 0.0f};
  const float* previous = buffers.params()[0].data();
  std::vector<tensor> values{tensor{{2}, 5.0f}, tensor{{1, 2}, 5.0f}};
  BOOST_TEST(!buffers.take_ahead(router.parts()[0], values));
  BOOST_TEST(buffers.params()[0].data()[0] == 5.0f);
  BOOST_TEST(values[0].data() == previous); // serves the next pull
}

BOOST_AUTO_TEST_CASE(pushed_gradients_come_back_now_or_after_the_next_cut) {
  buffers.reset(router, nullptr, 2);
  compute_gradients();
  const float* storage = buffers.grads()[0].data();
  auto sent = buffers.cut(router.parts()[0]);
  BOOST_TEST(buffers.grads()[0].size() == 0u); // a whole variable is moved out
  buffers.give_back(router.parts()[0], sent, true);
  BOOST_TEST(buffers.grads()[0].size() == 0u); // aside until reused
  buffers.reuse_spare();
  BOOST_TEST(buffers.grads()[0].data() == storage);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(step_pipeline_tests, parts_fixture)

BOOST_AUTO_TEST_CASE(plain_steps_pull_compute_push_report) {
  auto p = pipeline(false);
  p->begin(7);
  BOOST_TEST(basp.requests.size() == 2u); // a pull per shard
  BOOST_TEST(events.empty());             // nothing until both replies are in
  basp.answer_all();
  BOOST_TEST(events == std::vector<std::string>{"compute"});
  compute_gradients();
  p->computed({7, 0, 3, 0}, report_of(3), true);
  BOOST_REQUIRE(basp.requests.size() == 2u);
  BOOST_TEST(basp.requests[0].push);
  basp.answer_all();
  BOOST_TEST((events == std::vector<std::string>{"compute", "report 3", "over"}));
  BOOST_TEST(reports.at(0).applied);
}

BOOST_AUTO_TEST_CASE(a_refused_push_reports_the_step_not_applied) {
  auto p = pushed_step();
  basp.answer_all(failure{errc::stale_gradient, "late"});
  BOOST_TEST(events.at(1) == "report 3 not applied");
}

BOOST_AUTO_TEST_CASE(a_push_to_a_restarted_shard_starts_recovery) {
  auto p = pushed_step();
  basp.answer_all(failure{errc::not_initialized, "restarted"});
  BOOST_TEST(events.at(1) == "recover: push to ps:0 failed");
  BOOST_TEST(events.size() == 2u); // neither reported nor over: the run recovers
}

BOOST_AUTO_TEST_CASE(a_nonfinite_gradient_pushes_nothing) {
  auto p = pipeline(false);
  p->begin(7);
  basp.answer_all();
  p->computed({7, 0, 3, 0}, report_of(3), false);
  BOOST_TEST(basp.requests.empty());
  BOOST_TEST((events == std::vector<std::string>{"compute", "nonfinite", "over"}));
}

BOOST_AUTO_TEST_CASE(pull_ahead_reports_each_step_once_its_job_is_collected) {
  auto p = pipeline(true);
  p->begin(7); // step 0: pulled now
  basp.answer_all();
  p->before_compute(7); // step 1's values start moving
  BOOST_TEST(basp.requests.size() == 2u);
  compute_gradients();
  p->computed({7, 0, 0, 0}, report_of(0), true);
  // Collecting the pulls-only job waits for its replies.
  BOOST_TEST((events == std::vector<std::string>{"compute"}));
  basp.value = 2.0f;
  basp.answer_all();
  // Job 0 (step 0's push, then the pull of step 2's values) started.
  BOOST_TEST((events == std::vector<std::string>{"compute", "over"}));
  BOOST_REQUIRE(basp.requests.size() == 4u);
  BOOST_TEST(basp.requests[0].push);
  BOOST_TEST(basp.requests[0].step == 0);
  BOOST_TEST(!basp.requests[1].push);                // the same shard's pull after its push
  BOOST_TEST(buffers.params()[0].data()[0] == 2.0f); // step 1 computes on them
  p->begin(7);                                       // step 1: values ready, no pull
  BOOST_TEST(events.back() == "compute");
  BOOST_TEST(basp.requests.size() == 4u);
  p->before_compute(7); // a job is under way: nothing new
  compute_gradients();
  p->computed({7, 0, 1, 0}, report_of(1), true);
  basp.answer_all();
  BOOST_TEST(events.at(3) == "report 0"); // step 0, once its job is collected
  BOOST_TEST(events.at(4) == "over");
  // Out of grants: the last job is collected, its step reported.
  BOOST_TEST(p->flushable());
  p->flush();
  basp.answer_all();
  BOOST_TEST(events.at(5) == "report 1");
  BOOST_TEST(events.at(6) == "over");
  BOOST_TEST(!p->flushable());
}

BOOST_AUTO_TEST_CASE(a_dropped_job_ignores_its_late_replies) {
  auto p = pipeline(true);
  p->begin(7);
  basp.answer_all();
  p->before_compute(7);
  p->drop(); // a lost peer
  basp.answer_all();
  BOOST_TEST((events == std::vector<std::string>{"compute"}));
  BOOST_TEST(!p->flushable());
  p->begin(7); // the next plan's first step pulls afresh
  BOOST_TEST(basp.requests.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
