// Sync training, message by message on CAF's test_coordinator: the shard's
// accumulator, the token queue, backups, stop, shrink, and equivalence with
// one large-batch worker.
#define BOOST_TEST_MODULE sync
#include <cmath>
#include <memory>
#include <optional>
#include <random>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "actors/sync_accumulator.hpp"
#include "actors/token_queue.hpp"
#include "tensor/error.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;
using names = std::vector<std::string>;

namespace {

struct applied_event {
  int32_t shard;
  int64_t step;
};

// Stands in for the token queue: records what shards report.
token_queue_actor::behavior_type
spy_queue(token_queue_actor::pointer, std::shared_ptr<std::vector<applied_event>> log) {
  return {
    [](report_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
    [log](applied_atom, int32_t shard, int64_t step, double) { log->push_back({shard, step}); },
    [](stop_atom) {},
  };
}

// Stands in for the chief: records the token queue's step summaries.
chief_actor::behavior_type spy_chief(chief_actor::pointer,
                                     std::shared_ptr<std::vector<step_summary>> log) {
  return {
    [](hello_atom, uint32_t v, const std::string&, int32_t) -> caf::result<uint32_t> { return v; },
    [](ready_atom, int32_t) -> caf::result<training_plan> { return training_plan{}; },
    [](report_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
    [log](step_done_atom, const step_summary& s) { log->push_back(s); },
    [](tick_atom) {},
  };
}

using grant_slot = std::shared_ptr<std::optional<step_grant>>;

// A worker stand-in: reports `r` to the queue and keeps the answer when it comes.
grant_slot report_to(caf::actor_system& sys, token_queue_actor queue, step_report r) {
  auto slot = std::make_shared<std::optional<step_grant>>();
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(queue, caf::infinite, report_atom::value, r)
      .then([=](const step_grant& g) { *slot = g; });
  });
  return slot;
}

step_report report(int32_t worker, int64_t step, bool applied = true) {
  step_report r;
  r.worker = worker;
  r.step = step;
  r.applied = applied;
  r.examples = 4;
  return r;
}

training_settings sync_settings(int64_t last_step, int64_t batch, int64_t replicas = 0) {
  training_settings s;
  s.mode = "sync";
  s.batch_size = batch;
  s.last_step = last_step;
  s.log_interval = 0;
  s.optimizer = plain_sgd(0.1);
  s.shuffle = false;
  s.replicas_to_aggregate = replicas;
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(accumulator_averages_exactly_r_gradients) {
  sync_accumulator acc({"w"}, 2);
  BOOST_TEST((acc.add(0, 0, {tensor({2}, 2.0f)}) == sync_accumulator::verdict::accepted));
  BOOST_TEST(!acc.ready());
  BOOST_TEST((acc.add(0, 0, {tensor({2}, 9.0f)}) == sync_accumulator::verdict::duplicate));
  BOOST_TEST((acc.add(1, 1, {tensor({2}, 9.0f)}) == sync_accumulator::verdict::ahead));
  BOOST_TEST((acc.add(1, 0, {tensor({2}, 4.0f)}) == sync_accumulator::verdict::accepted));
  BOOST_REQUIRE(acc.ready());
  auto mean = acc.take_average();
  BOOST_TEST(mean[0][1] == 3.0f);
  BOOST_TEST(acc.step() == 1);
  BOOST_TEST((acc.add(2, 0, {tensor({2}, 1.0f)}) == sync_accumulator::verdict::stale));
  BOOST_TEST(acc.dropped() == 1u); // the stale one; a duplicate is not a drop
  acc.set_required(1);
  BOOST_TEST((acc.add(2, 1, {tensor({2}, 1.0f)}) == sync_accumulator::verdict::accepted));
  BOOST_TEST(acc.ready());
}

BOOST_FIXTURE_TEST_SUITE(sync_actors, deterministic_fixture)

// R = 2 of N = 3: nothing is applied before the second gradient, the update
// happens exactly then, and the third (backup) worker's late gradient is
// dropped and answered stale.
BOOST_AUTO_TEST_CASE(shard_applies_at_the_rth_gradient_and_drops_stale_ones) {
  auto log = std::make_shared<std::vector<applied_event>>();
  auto queue = sys.spawn(spy_queue, log);
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, names{"w"},
                                  std::vector<tensor>{tensor({2}, 1.0f)},
                                  shard_options{true, 2, 10, queue}));
  auto first = ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{0}, names{"w"},
                            std::vector<tensor>{tensor({2}, 2.0f)});
  BOOST_REQUIRE(first);
  BOOST_TEST(*first == 0);
  auto pulled = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_TEST(pulled->values[0][0] == 1.0f); // not applied yet
  BOOST_TEST(log->empty());
  auto second = ask<int64_t>(s, push_atom::value, int32_t{1}, int64_t{0}, names{"w"},
                             std::vector<tensor>{tensor({2}, 4.0f)});
  BOOST_REQUIRE(second);
  BOOST_TEST(*second == 1);
  pulled = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_TEST(pulled->values[0][0] == 1.0f - 0.5f * 3.0f); // the mean, applied once
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->at(0).step == 1);
  auto late = ask<int64_t>(s, push_atom::value, int32_t{2}, int64_t{0}, names{"w"},
                           std::vector<tensor>{tensor({2}, 100.0f)});
  BOOST_REQUIRE(!late);
  BOOST_TEST(is(late.error(), errc::stale_gradient));
  BOOST_TEST(describe(late.error()).find("worker:2") != std::string::npos);
  pulled = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_TEST(pulled->values[0][0] == -0.5f); // unchanged by the stale gradient
  BOOST_TEST(log->size() == 1u);
  // A push at or past last_step is refused: nothing runs after the end.
  auto past = ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{10}, names{"w"},
                           std::vector<tensor>{tensor({2}, 1.0f)});
  BOOST_REQUIRE(!past);
  BOOST_TEST(is(past.error(), errc::training_stopped));
}

BOOST_AUTO_TEST_CASE(shrinking_r_applies_a_step_a_lost_worker_blocked) {
  auto log = std::make_shared<std::vector<applied_event>>();
  auto queue = sys.spawn(spy_queue, log);
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(1.0)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, names{"w"},
                                  std::vector<tensor>{tensor({1}, 0.0f)},
                                  shard_options{true, 2, 10, queue}));
  BOOST_REQUIRE(ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{0}, names{"w"},
                             std::vector<tensor>{tensor({1}, 1.0f)}));
  BOOST_TEST(log->empty()); // waiting for a second worker that is gone
  caf::anon_send(s, replicas_atom::value, int32_t{1});
  sched.run();
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->at(0).step == 1);
}

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

// A whole sync cluster: every token a worker receives carries a step that
// every shard holding variables has already reached.
BOOST_AUTO_TEST_CASE(cluster_tokens_follow_updates) {
  training_result result;
  auto run = spawn_local_cluster(sys, sync_settings(8, 4), runtime_settings{}, 2, 3,
                                 synthetic_data(), [&](const training_result& r) { result = r; },
                                 spawn_mode::cooperative);
  std::map<int64_t, int> shards_at;
  int tokens = 0, early_tokens = 0;
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    if (auto* e = next.mailbox().peek()) {
      auto& msg = e->content();
      if (msg.match_element<applied_atom>(0))
        ++shards_at[msg.get_as<int64_t>(2)];
      if (msg.size() == 1 && msg.match_element<step_grant>(0)) {
        auto& g = msg.get_as<step_grant>(0);
        if (!g.stop && g.step > 0) {
          ++tokens;
          if (shards_at[g.step] < 2)
            ++early_tokens;
        }
      }
    }
    sched.run_once();
  }
  BOOST_TEST(result.ok);
  BOOST_TEST(result.mode == "sync");
  BOOST_TEST(result.global_step == 8);
  BOOST_TEST(tokens == 7 * 3); // steps 1..7, one token per worker
  BOOST_TEST(early_tokens == 0);
}

BOOST_AUTO_TEST_CASE(shrink_lets_training_finish_without_a_lost_worker) {
  training_result result;
  auto settings = sync_settings(12, 4);
  settings.on_worker_loss = "shrink";
  auto run = spawn_local_cluster(sys, settings, runtime_settings{}, 1, 2, synthetic_data(),
                                 [&](const training_result& r) { result = r; },
                                 spawn_mode::cooperative);
  int reports = 0;
  bool killed = false;
  auto w1 = caf::actor_cast<caf::actor>(run.workers[1]);
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    if (auto* e = next.mailbox().peek())
      if (e->content().match_element<report_atom>(0) && ++reports == 6 && !killed) {
        killed = true;
        caf::anon_send_exit(w1, caf::exit_reason::kill);
      }
    sched.run_once();
  }
  BOOST_TEST(killed);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 12);
}

// One sync step of N = 2 workers with batch b equals one step of a single
// worker with batch 2b over the same examples (plain SGD, fixed data order);
// so do 20 steps.
BOOST_AUTO_TEST_CASE(two_workers_equal_one_worker_with_twice_the_batch) {
  auto data = synthetic_data();
  for (int64_t steps : {1, 20}) {
    training_result two, one;
    spawn_local_cluster(sys, sync_settings(steps, 4), runtime_settings{}, 2, 2, data,
                        [&](const training_result& r) { two = r; }, spawn_mode::cooperative);
    sched.run();
    auto single = sync_settings(steps, 8);
    single.mode = "async";
    spawn_local_cluster(sys, single, runtime_settings{}, 1, 1, data,
                        [&](const training_result& r) { one = r; }, spawn_mode::cooperative);
    sched.run();
    BOOST_REQUIRE(two.ok);
    BOOST_REQUIRE(one.ok);
    BOOST_REQUIRE(two.values.size() == one.values.size());
    // Relative error of each variable as a vector, ||a - b|| / ||b||; the
    // largest element-wise difference is reported beside it.
    double worst = 0, worst_element = 0;
    for (size_t v = 0; v < one.values.size(); ++v) {
      double diff = 0, norm = 0;
      for (size_t i = 0; i < one.values[v].size(); ++i) {
        double a = two.values[v][i], b = one.values[v][i];
        diff += (a - b) * (a - b);
        norm += b * b;
        worst_element = std::max(worst_element, std::fabs(a - b));
      }
      worst = std::max(worst, std::sqrt(diff / norm));
    }
    BOOST_TEST_MESSAGE(steps << " step(s): relative error " << worst
                             << ", largest element difference " << worst_element);
    BOOST_TEST(worst <= 1e-5);
    // The runs are not trivially equal: training moved the weights.
    double moved = 0;
    for (size_t i = 0; i < one.values[0].size(); ++i)
      moved = std::max(moved, double(std::fabs(one.values[0][i])));
    BOOST_TEST(moved > 1e-4);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(sync_failures, deterministic_fixture)

// With R = N a step cannot complete without every worker: a non-finite
// gradient ends the run at once with a clear error instead of stalling.
BOOST_AUTO_TEST_CASE(a_non_finite_gradient_ends_a_sync_run) {
  auto data = synthetic_data(true);
  training_result result;
  auto baseline = sys.registry().running();
  spawn_local_cluster(sys, sync_settings(5, 4), runtime_settings{}, 1, 2, data,
                      [&](const training_result& r) { result = r; }, spawn_mode::cooperative);
  sched.run();
  BOOST_TEST(!result.ok);
  BOOST_TEST(result.error.find("non-finite gradient") != std::string::npos, result.error);
  BOOST_TEST(sys.registry().running() == baseline);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(partitioned, deterministic_fixture)

// Training with variables split across shards gives the same parameters as
// with whole variables (sync, SGD, fixed data order): slices are gathered
// and scattered transparently.
BOOST_AUTO_TEST_CASE(partitioned_training_equals_unpartitioned) {
  training_result whole, split, by_rule;
  auto settings = sync_settings(20, 4);
  settings.placement = "round_robin";
  spawn_local_cluster(sys, settings, runtime_settings{}, 2, 2, synthetic_data(),
                      [&](const training_result& r) { whole = r; }, spawn_mode::cooperative);
  sched.run();
  settings.placement = "balanced";
  spawn_local_cluster(sys, settings, runtime_settings{}, 2, 2, synthetic_data(),
                      [&](const training_result& r) { split = r; }, spawn_mode::cooperative);
  sched.run();
  // Partitioner rules from the config: the weights split by columns (axis 1,
  // one strided block per row), the biases by rows, placed round robin.
  settings.placement = "round_robin";
  settings.partitioners = {"softmax/weights fixed_size shards=2 axis=1",
                           "softmax/b* fixed_size shards=3"};
  spawn_local_cluster(sys, settings, runtime_settings{}, 2, 2, synthetic_data(),
                      [&](const training_result& r) { by_rule = r; }, spawn_mode::cooperative);
  sched.run();
  BOOST_REQUIRE(whole.ok);
  BOOST_REQUIRE(split.ok);
  BOOST_REQUIRE(by_rule.ok);
  BOOST_TEST(whole.ps_imbalance > 1.9);  // round robin: the weights on one shard
  BOOST_TEST(split.ps_imbalance < 1.05); // balanced: softmax/weights split in parts
  BOOST_TEST(by_rule.ps_imbalance < 1.01);  // 5 columns + 4 biases (2 + 2) on each shard
  BOOST_REQUIRE(by_rule.traffic.size() == 2u);
  BOOST_TEST(by_rule.traffic[0].variables.size() == 3u);  // part_0 of weights, part_0 and part_2 of biases
  auto relative_error = [](const training_result& a, const training_result& b) {
    BOOST_REQUIRE(a.values.size() == b.values.size());
    double worst = 0;
    for (size_t v = 0; v < b.values.size(); ++v) {
      BOOST_REQUIRE(a.values[v].shape() == b.values[v].shape());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < b.values[v].size(); ++i) {
        double x = a.values[v][i], y = b.values[v][i];
        diff += (x - y) * (x - y);
        norm += y * y;
      }
      worst = std::max(worst, std::sqrt(diff / norm));
    }
    return worst;
  };
  // Through the library API a rule that does not fit the model is refused
  // before anything is spawned.
  settings.partitioners = {"softmax/biases fixed_size shards=2 axis=1"};
  auto spawn_with_bad_rule = [&] {
    spawn_local_cluster(sys, settings, runtime_settings{}, 2, 2, synthetic_data(),
                        [](const training_result&) {}, spawn_mode::cooperative);
  };
  BOOST_CHECK_THROW(spawn_with_bad_rule(), troupe_error);
  auto balanced_error = relative_error(split, whole), rule_error = relative_error(by_rule, whole);
  BOOST_TEST_MESSAGE("partitioned vs whole: relative error " << balanced_error << " (balanced), "
                     << rule_error << " (rules, axis 1)");
  BOOST_TEST(balanced_error <= 1e-6);
  BOOST_TEST(rule_error <= 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
