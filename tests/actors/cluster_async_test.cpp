// Whole clusters in async mode through the library API, message by message
// on CAF's test_coordinator.
#include <cmath>
#include <map>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// Ten steps, round robin: the weights whole on ps:0, the biases on ps:1.
training_settings ten_steps_round_robin() {
  auto settings = small_settings(10);
  settings.placement = placement_strategy::round_robin;
  return settings;
}

// One worker and two shards run to the end; the run must succeed.
training_result one_worker_two_shards(caf::actor_system& sys,
                                      caf::scheduler::test_coordinator& sched,
                                      const training_settings& settings) {
  training_result result;
  auto run = cooperative_cluster(sys, settings, 2, 1, result);
  sched.run();
  BOOST_REQUIRE(result.ok);
  BOOST_TEST(result.global_step == settings.last_step);
  BOOST_REQUIRE(result.traffic.size() == 2u);
  return result;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(cluster_async, deterministic_fixture)

// Two workers ask "ready?" before the shards have even seen the chief's init:
// both wait on a promise, each shard is initialised exactly once, and both
// get the plan only after the last init was acknowledged.
BOOST_AUTO_TEST_CASE(chief_initialises_once_while_workers_race) {
  training_result result;
  auto run = cooperative_cluster(sys, small_settings(6), 2, 2, result);
  auto* chief = raw(run.chief);
  std::map<caf::abstract_actor*, int> inits;
  std::vector<std::string> chief_events;
  int plans_before_init_done = 0, plans = 0, acks = 0;
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<init_atom>(0))
      ++inits[who];
    if (who == chief && msg.match_element<ready_atom>(0))
      chief_events.push_back("ready");
    // The shards' acks of the init; the value reader's ok at the end (the
    // final values read) is not one.
    if (who == chief && msg.size() == 1 && msg.match_element<caf::ok_atom>(0) && acks < 2) {
      chief_events.push_back("init_ack");
      ++acks;
    }
    if (msg.size() == 1 && msg.match_element<training_plan>(0)) {
      ++plans;
      if (acks < 2)
        ++plans_before_init_done;
    }
  });
  BOOST_TEST(inits.size() == 2u);
  for (auto& kv : inits)
    BOOST_TEST(kv.second == 1);
  BOOST_REQUIRE(chief_events.size() == 4u);
  BOOST_TEST(chief_events[0] == "ready"); // both asked before any init finished
  BOOST_TEST(chief_events[1] == "ready");
  BOOST_TEST(plans == 2);
  BOOST_TEST(plans_before_init_done == 0);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 6);
}

// Exactly last_step updates happen; stop reaches every shard and worker,
// and no pull or push reaches a shard after its stop.
BOOST_AUTO_TEST_CASE(stop_at_last_step_reaches_every_actor) {
  training_result result;
  bool finished = false;
  auto baseline = sys.registry().running();
  // Round robin (not the balanced default), so that each variable's bytes
  // land whole on a known shard and the traffic report can be checked exactly.
  auto settings = small_settings(10);
  settings.placement = placement_strategy::round_robin;
  auto run = spawn_local_cluster(
    sys, settings, runtime_settings{}, 2, 3, synthetic_data(),
    [&](const training_result& r) {
      result = r;
      finished = true;
    },
    spawn_mode::cooperative);
  std::map<caf::abstract_actor*, int> pushes;
  std::map<caf::abstract_actor*, bool> stopped;
  int after_stop = 0;
  std::vector<caf::abstract_actor*> shards{raw(run.shards[0]), raw(run.shards[1])};
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<push_atom>(0) || msg.match_element<pull_atom>(0)) {
      if (stopped[who])
        ++after_stop;
      if (msg.match_element<push_atom>(0))
        ++pushes[who];
    }
    if (msg.match_element<stop_atom>(0))
      stopped[who] = true;
  });
  BOOST_REQUIRE(finished);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 10);
  BOOST_TEST(result.examples == 40u);
  // softmax/weights on ps:0, softmax/biases on ps:1: one push each per step.
  BOOST_TEST(pushes[shards[0]] == 10);
  BOOST_TEST(pushes[shards[1]] == 10);
  BOOST_TEST(after_stop == 0);
  BOOST_TEST(stopped[shards[0]]);
  BOOST_TEST(stopped[shards[1]]);
  BOOST_TEST(sys.registry().running() == baseline); // every actor has quit
  // The traffic report: every push counted, with its bytes, per shard and
  // variable; round robin puts almost all bytes on ps:0.
  BOOST_REQUIRE(result.traffic.size() == 2u);
  auto& ps0 = result.traffic[0];
  BOOST_TEST(ps0.shard == 0);
  BOOST_TEST(ps0.pushes == 10u);
  BOOST_TEST(ps0.bytes_in == 10u * 784u * 10u * 4u);
  BOOST_TEST(ps0.bytes_held == 784u * 10u * 4u);
  BOOST_REQUIRE(ps0.variables.size() == 1u);
  BOOST_TEST(ps0.variables[0].name == "softmax/weights");
  BOOST_TEST(ps0.variables[0].bytes_in == ps0.bytes_in);
  BOOST_TEST(result.traffic[1].bytes_in == 10u * 10u * 4u);
  BOOST_TEST(result.ps_imbalance > 1.99);
  BOOST_TEST(result.traffic_json().find("\"softmax/biases\":{\"in\":400,") != std::string::npos,
             result.traffic_json());
}

// train.wire-precision = bf16: every push and pull of a worker crosses at
// half the bytes (the shard's counters see the packed tensors), whole
// variables and slices of a split one alike, and training ends where fp32
// ends up to the rounding, with pull-ahead too; the chief's final read
// stays fp32.
BOOST_AUTO_TEST_CASE(bf16_on_the_wire_halves_the_bytes_and_trains_as_fp32) {
  auto train = [&](wire_precision precision, bool split, bool ahead) {
    auto settings = ten_steps_round_robin();
    if (split) // the weights in two slices, one per shard
      settings.partitioners = parse_partition_rules({"softmax/weights fixed_size shards=2"});
    settings.wire_precision = precision;
    settings.pull_ahead = ahead;
    return one_worker_two_shards(sys, sched, settings);
  };
  // (split, pull-ahead); not a structured binding: clang refuses capturing one.
  for (auto variant : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    const bool split = variant.first, ahead = variant.second;
    BOOST_TEST_CONTEXT("split " << split << ", pull-ahead " << ahead) {
      auto fp32 = train(wire_precision::fp32, split, ahead);
      auto bf16 = train(wire_precision::bf16, split, ahead);
      uint64_t in32 = 0, in16 = 0;
      for (size_t k = 0; k < 2; ++k) {
        in32 += fp32.traffic[k].bytes_in;
        in16 += bf16.traffic[k].bytes_in;
      }
      BOOST_TEST(in32 == 10u * (784u * 10u + 10u) * 4u);
      BOOST_TEST(in16 == in32 / 2);
      // Out: the worker's pulls halve; the chief's final fp32 read does not.
      uint64_t out32 = fp32.traffic[0].bytes_out + fp32.traffic[1].bytes_out;
      uint64_t out16 = bf16.traffic[0].bytes_out + bf16.traffic[1].bytes_out;
      uint64_t model = (784u * 10u + 10u) * 4u;
      BOOST_TEST(out32 - model == 2 * (out16 - model));
      BOOST_REQUIRE(bf16.values.size() == fp32.values.size());
      float largest = 0;
      bool same = true;
      for (size_t v = 0; v < fp32.values.size(); ++v)
        for (size_t i = 0; i < fp32.values[v].size(); ++i) {
          largest = std::max(largest, std::fabs(fp32.values[v][i] - bf16.values[v][i]));
          same = same && fp32.values[v][i] == bf16.values[v][i];
        }
      BOOST_TEST(largest < 1e-2f, largest);
      BOOST_TEST(!same); // rounded on the way: the packing happened
    }
  }
}

// train.push-topk: each push carries that fraction of each variable's
// values as (index, value) pairs, 8 bytes each, the rest kept for the next
// push. At 1.0 every value travels exactly: the run ends bit-equal to
// fp32's, which checks the pairs' whole path. At 0.1 a push is 0.2 x the
// fp32 bytes. Pulls stay fp32.
BOOST_AUTO_TEST_CASE(topk_pushes_send_a_fraction_and_keep_the_rest) {
  auto train = [&](double topk) {
    auto settings = ten_steps_round_robin();
    settings.push_topk = topk;
    return one_worker_two_shards(sys, sched, settings);
  };
  auto dense = train(0);
  auto all = train(1.0);
  BOOST_TEST(all.traffic[0].bytes_in == 2 * dense.traffic[0].bytes_in); // index + value
  BOOST_TEST(all.traffic[0].bytes_out == dense.traffic[0].bytes_out);
  for (size_t v = 0; v < dense.values.size(); ++v)
    BOOST_TEST(all.values[v].bit_equal(dense.values[v]));
  auto tenth = train(0.1);
  BOOST_TEST(tenth.traffic[0].bytes_in == 10u * 784u * 8u); // k = 784 of 7840 weights
  BOOST_TEST(tenth.traffic[1].bytes_in == 10u * 1u * 8u);   // k = 1 of 10 biases
  BOOST_TEST(tenth.traffic[0].bytes_out == dense.traffic[0].bytes_out);
  BOOST_TEST(tenth.values[0].all_finite());
  BOOST_TEST(!tenth.values[0].bit_equal(dense.values[0]));
}

// Worker 1 is killed the moment the chief grants it a step, so it dies
// holding that grant: the step goes back and is granted to worker 0, and the
// run still counts exactly last_step updates.
BOOST_AUTO_TEST_CASE(a_lost_worker_does_not_stop_training) {
  training_result result;
  auto run = cooperative_cluster(sys, small_settings(20), 1, 2, result);
  auto* w0 = raw(run.workers[0]);
  auto* w1 = raw(run.workers[1]);
  int64_t held = -1; // the step worker 1 held when it was killed
  int regranted = 0; // grants of that step to worker 0 afterwards
  run_observed(sched, [&](caf::abstract_actor* to, const caf::type_erased_tuple& msg) {
    if (msg.size() != 1 || !msg.match_element<step_grant>(0))
      return;
    auto& grant = msg.get_as<step_grant>(0);
    if (to == w1 && held < 0 && !grant.stop && grant.step >= 4) {
      held = grant.step;
      caf::anon_send_exit(caf::actor_cast<caf::actor>(w1), caf::exit_reason::kill);
    } else if (to == w0 && held >= 0 && grant.step == held) {
      ++regranted;
    }
  });
  BOOST_REQUIRE(held >= 0);
  BOOST_TEST(regranted == 1);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 20);
}

// train.report-every = 4: the workers report in batches, one message to the
// chief per batch and none per step; every step is reported once. Worker 2
// is killed as the shard takes its sixth push, so it dies holding granted
// steps and a pushed step it never reported: the chief grants those again,
// the shard does not apply the landed one twice, and the run counts exactly
// last_step updates.
BOOST_AUTO_TEST_CASE(batched_reports_count_every_step_once_and_survive_a_lost_worker) {
  auto settings = small_settings(40);
  settings.report_every = 4;
  training_result result;
  auto run = cooperative_cluster(sys, settings, 1, 3, result);
  auto* chief = raw(run.chief);
  auto* shard = raw(run.shards[0]);
  int batches = 0, singles = 0, largest = 0, pushes_of_2 = 0;
  std::map<int64_t, int> reported; // applied step -> reports of it
  run_observed(sched, [&](caf::abstract_actor* to, const caf::type_erased_tuple& msg) {
    if (to == chief && msg.match_elements<reports_atom, std::vector<step_report>>()) {
      auto& rs = msg.get_as<std::vector<step_report>>(1);
      ++batches;
      largest = std::max(largest, static_cast<int>(rs.size()));
      for (auto& r : rs)
        if (r.applied)
          ++reported[r.step];
    }
    if (to == chief && msg.match_elements<report_atom, step_report>())
      ++singles;
    if (to == shard && msg.match_elements<push_atom, step_push>()
        && msg.get_as<step_push>(1).worker == 2 && ++pushes_of_2 == 6)
      caf::anon_send_exit(caf::actor_cast<caf::actor>(run.workers[2]), caf::exit_reason::kill);
  });
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 40);
  BOOST_TEST(result.lost_workers == 1u);
  BOOST_TEST(singles == 0);
  BOOST_TEST(largest == 4);
  BOOST_TEST(batches < 25); // 40 steps: about 40 / 4 batches plus the first asks
  BOOST_REQUIRE(pushes_of_2 >= 6);
  for (auto& [step, count] : reported)
    BOOST_TEST(count == 1, "step " << step << " reported " << count << " times");
  // Steps 0..39 reported once each, except worker 2's landed but unreported push.
  BOOST_TEST(reported.size() >= 39u);
}

// The final evaluation runs on an actor of its own: the chief answers other
// messages while the evaluation waits to run.
BOOST_AUTO_TEST_CASE(evaluation_does_not_block_the_chief) {
  training_result result;
  auto run = cooperative_cluster(sys, small_settings(4), 1, 1, result);
  auto* chief = raw(run.chief);
  caf::abstract_actor* evaluator = nullptr;
  auto answered = std::make_shared<bool>(false);
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    auto* element = next.mailbox().peek();
    if (!evaluator && element && element->content().match_element<evaluate_atom>(0)) {
      evaluator = &next;
      auto chief_handle = run.chief;
      auto asker = sys.spawn([=](caf::event_based_actor* ask) {
        ask
          ->request(chief_handle, caf::infinite, hello_atom::value, protocol_version,
                    std::string("test"), int32_t{0})
          .then([=](uint32_t) { *answered = true; });
      });
      sched.prioritize(asker);
      sched.run_once(); // the asker sends its hello
      sched.prioritize(run.chief);
      sched.run_once(); // the chief answers it, the evaluation still queued
      sched.prioritize(asker);
      sched.run_once();
      BOOST_TEST(*answered);
      BOOST_TEST(evaluator->id() != chief->id());
      continue;
    }
    sched.run_once();
  }
  BOOST_REQUIRE(evaluator != nullptr);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.test_accuracy > 0);
}

BOOST_AUTO_TEST_CASE(non_finite_gradients_are_refused_then_the_run_fails) {
  training_result result;
  runtime_settings runtime;
  runtime.max_refused_steps = 3;
  auto baseline = sys.registry().running();
  auto run = cooperative_cluster(sys, small_settings(10), 1, 1, result, synthetic_data(true),
                                 runtime);
  sched.run();
  BOOST_TEST(!result.ok);
  BOOST_TEST(result.refused_steps == 4);
  BOOST_TEST(result.global_step == 0);
  BOOST_TEST(result.error.find("diverged") != std::string::npos);
  BOOST_TEST(sys.registry().running() == baseline);
}

BOOST_AUTO_TEST_SUITE_END()
