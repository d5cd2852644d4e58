// Whole clusters in sync mode through the library API, message by message on
// CAF's test_coordinator: tokens, shrink, equivalence with one large-batch
// worker, partitioned variables.
#include <cmath>
#include <map>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

BOOST_FIXTURE_TEST_SUITE(cluster_sync, deterministic_fixture)

// A whole sync cluster: every token a worker receives carries a step that
// every shard holding variables has already reached.
BOOST_AUTO_TEST_CASE(cluster_tokens_follow_updates) {
  training_result result;
  auto run = cooperative_cluster(sys, sync_settings(8, 4), 2, 3, result);
  std::map<int64_t, int> shards_at;
  int tokens = 0, early_tokens = 0;
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    if (auto* e = next.mailbox().peek()) {
      auto& msg = e->content();
      if (msg.match_element<applied_atom>(0))
        ++shards_at[msg.get_as<int64_t>(3)]; // (applied, run, shard, step, ms)
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
  BOOST_TEST((result.mode == update_mode::sync));
  BOOST_TEST(result.global_step == 8);
  BOOST_TEST(tokens == 7 * 3); // steps 1..7, one token per worker
  BOOST_TEST(early_tokens == 0);
}

BOOST_AUTO_TEST_CASE(shrink_lets_training_finish_without_a_lost_worker) {
  training_result result;
  auto settings = sync_settings(12, 4);
  settings.on_worker_loss = worker_loss_policy::shrink;
  auto run = cooperative_cluster(sys, settings, 1, 2, result);
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
// so do 20 steps. Worker 0 reads examples 0..19 and worker 1 20..39: the
// single worker reads them interleaved four by four, so that its step k
// takes exactly the examples of their step k.
BOOST_AUTO_TEST_CASE(two_workers_equal_one_worker_with_twice_the_batch) {
  auto data = synthetic_data();
  auto& all = *data.train->memory;
  auto interleaved = std::make_shared<dataset>(all);
  for (size_t k = 0; k < 5; ++k)
    for (size_t j = 0; j < 8; ++j) {
      size_t from = (j < 4 ? 0 : 20) + 4 * k + j % 4, to = 8 * k + j;
      std::copy_n(all.images.data() + from * 784, 784, interleaved->images.data() + to * 784);
      interleaved->labels[to] = all.labels[from];
    }
  training_data single_data{split_in_memory(interleaved, "training set"), data.test};
  for (int64_t steps : {1, 20}) {
    training_result two, one;
    cooperative_cluster(sys, sync_settings(steps, 4), 2, 2, two, data);
    sched.run();
    auto single = sync_settings(steps, 8);
    single.mode = update_mode::async;
    cooperative_cluster(sys, single, 1, 1, one, single_data);
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

// With R = N a step cannot complete without every worker: a non-finite
// gradient ends the run at once with a clear error instead of stalling.
BOOST_AUTO_TEST_CASE(a_non_finite_gradient_ends_a_sync_run) {
  auto data = synthetic_data(true);
  training_result result;
  auto baseline = sys.registry().running();
  cooperative_cluster(sys, sync_settings(5, 4), 1, 2, result, data);
  sched.run();
  BOOST_TEST(!result.ok);
  BOOST_TEST(result.error.find("non-finite gradient") != std::string::npos, result.error);
  BOOST_TEST(sys.registry().running() == baseline);
}

// Training with variables split across shards gives the same parameters as
// with whole variables (sync, SGD, fixed data order): slices are gathered
// and scattered transparently.
BOOST_AUTO_TEST_CASE(partitioned_training_equals_unpartitioned) {
  training_result whole, split, by_rule;
  auto settings = sync_settings(20, 4);
  settings.placement = placement_strategy::round_robin;
  cooperative_cluster(sys, settings, 2, 2, whole);
  sched.run();
  settings.placement = placement_strategy::balanced;
  cooperative_cluster(sys, settings, 2, 2, split);
  sched.run();
  // Partitioner rules from the config: the weights split by columns (axis 1,
  // one strided block per row), the biases by rows, placed round robin.
  settings.placement = placement_strategy::round_robin;
  settings.partitioners = parse_partition_rules(
    {"softmax/weights fixed_size shards=2 axis=1", "softmax/b* fixed_size shards=3"});
  cooperative_cluster(sys, settings, 2, 2, by_rule);
  sched.run();
  BOOST_REQUIRE(whole.ok);
  BOOST_REQUIRE(split.ok);
  BOOST_REQUIRE(by_rule.ok);
  BOOST_TEST(whole.ps_imbalance > 1.9);    // round robin: the weights on one shard
  BOOST_TEST(split.ps_imbalance < 1.05);   // balanced: softmax/weights split in parts
  BOOST_TEST(by_rule.ps_imbalance < 1.01); // 5 columns + 4 biases (2 + 2) on each shard
  BOOST_REQUIRE(by_rule.traffic.size() == 2u);
  BOOST_TEST(by_rule.traffic[0].variables.size()
             == 3u); // part_0 of weights, part_0 and part_2 of biases
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
  settings.partitioners = parse_partition_rules({"softmax/biases fixed_size shards=2 axis=1"});
  auto spawn_with_bad_rule = [&] {
    spawn_local_cluster(
      sys, settings, runtime_settings{}, 2, 2, synthetic_data(), [](const training_result&) {},
      spawn_mode::cooperative);
  };
  BOOST_CHECK_THROW(spawn_with_bad_rule(), troupe_error);
  auto balanced_error = relative_error(split, whole), rule_error = relative_error(by_rule, whole);
  BOOST_TEST_MESSAGE("partitioned vs whole: relative error " << balanced_error << " (balanced), "
                                                             << rule_error << " (rules, axis 1)");
  BOOST_TEST(balanced_error <= 1e-6);
  BOOST_TEST(rule_error <= 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
