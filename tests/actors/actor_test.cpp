// Deterministic tests of the actors, message by message, on CAF's
// test_coordinator.
#define BOOST_TEST_MODULE actors
#include <cmath>
#include <map>
#include <random>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;
using names = std::vector<std::string>;

namespace {

training_settings small_settings(int64_t last_step) {
  training_settings s;
  s.batch_size = 4;
  s.last_step = last_step;
  s.log_interval = 0;
  s.optimizer = plain_sgd(0.1);
  return s;
}

template <class Handle>
caf::abstract_actor* raw(const Handle& h) {
  return caf::actor_cast<caf::abstract_actor*>(h);
}

// Runs every actor until idle, one message at a time, handing each message
// and its receiver to `observe` before it is processed.
template <class F>
void run_observed(caf::scheduler::test_coordinator& sched, F observe) {
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    if (auto* element = next.mailbox().peek())
      observe(static_cast<caf::abstract_actor*>(&next), element->content());
    sched.run_once();
  }
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(shard, deterministic_fixture)

BOOST_AUTO_TEST_CASE(pull_and_push_semantics) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto early = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_REQUIRE(!early);
  BOOST_TEST(is(early.error(), errc::not_initialized));

  std::vector<tensor> init{tensor({2, 2}, 1.0f), tensor({2}, 0.5f)};
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, names{"w", "b"}, init, shard_options{}));
  auto pulled = ask<pull_reply>(s, pull_atom::value, names{"b", "w"});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->version == 0);
  BOOST_TEST(pulled->values[0].bit_equal(init[1])); // in the order asked
  BOOST_TEST(pulled->values[1].bit_equal(init[0]));

  auto version = ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{0}, names{"w"},
                              std::vector<tensor>{tensor({2, 2}, 1.0f)});
  BOOST_REQUIRE(version);
  BOOST_TEST(*version == 1);
  pulled = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0][3] == 0.5f); // 1 - 0.5 * 1
  BOOST_TEST(pulled->version == 1);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_and_change_nothing) {
  auto s = sys.spawn(ps_shard, ps_shard_config{3, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, names{"w"},
                                  std::vector<tensor>{tensor({3}, 2.0f)}, shard_options{}));
  auto unknown = ask<pull_reply>(s, pull_atom::value, names{"v"});
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(is(unknown.error(), errc::unknown_variable));
  BOOST_TEST(describe(unknown.error()).find("'v'") != std::string::npos);
  BOOST_TEST(describe(unknown.error()).find("ps:3") != std::string::npos);

  auto wrong_shape = ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{0}, names{"w"},
                                  std::vector<tensor>{tensor({4}, 1.0f)});
  BOOST_REQUIRE(!wrong_shape);
  BOOST_TEST(is(wrong_shape.error(), errc::shape_mismatch));

  tensor nan_grad({3}, 1.0f);
  nan_grad[2] = std::nanf("");
  auto nan_push = ask<int64_t>(s, push_atom::value, int32_t{0}, int64_t{0}, names{"w"},
                               std::vector<tensor>{nan_grad});
  BOOST_REQUIRE(!nan_push);
  BOOST_TEST(is(nan_push.error(), errc::non_finite_gradient));

  auto again = ask<caf::ok_atom>(s, init_atom::value, names{"w"},
                                 std::vector<tensor>{tensor({3}, 9.0f)}, shard_options{});
  BOOST_REQUIRE(!again);
  BOOST_TEST(is(again.error(), errc::already_initialized));

  auto pulled = ask<pull_reply>(s, pull_atom::value, names{"w"});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->version == 0);
  BOOST_TEST(pulled->values[0].bit_equal(tensor({3}, 2.0f)));
}

BOOST_AUTO_TEST_CASE(hello_refuses_another_protocol_version) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto ok = ask<uint32_t>(s, hello_atom::value, protocol_version, std::string("worker"), 0);
  BOOST_REQUIRE(ok);
  BOOST_TEST(*ok == protocol_version);
  auto refused = ask<uint32_t>(s, hello_atom::value, protocol_version + 1, std::string("worker"), 1);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(is(refused.error(), errc::protocol_mismatch));
  BOOST_TEST(describe(refused.error()).find("worker:1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(in_process_tensors_are_not_copied) {
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](const tensor& t) { return reinterpret_cast<uint64_t>(t.data()); }};
  });
  sched.run();
  tensor t({1000}, 1.0f);
  auto address = reinterpret_cast<uint64_t>(t.data());
  auto seen = ask<uint64_t>(echo, std::move(t));
  BOOST_REQUIRE(seen);
  BOOST_TEST(*seen == address);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(cluster, deterministic_fixture)

// Two workers ask "ready?" before the shards have even seen the chief's init:
// both wait on a promise, each shard is initialised exactly once, and both
// get the plan only after the last init was acknowledged.
BOOST_AUTO_TEST_CASE(chief_initialises_once_while_workers_race) {
  training_result result;
  auto run = spawn_local_cluster(sys, small_settings(6), runtime_settings{}, 2, 2,
                                 synthetic_data(), [&](const training_result& r) { result = r; },
                                 spawn_mode::cooperative);
  auto* chief = raw(run.chief);
  std::map<caf::abstract_actor*, int> inits;
  std::vector<std::string> chief_events;
  int plans_before_init_done = 0, plans = 0, acks = 0;
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<init_atom>(0))
      ++inits[who];
    if (who == chief && msg.match_element<ready_atom>(0))
      chief_events.push_back("ready");
    if (who == chief && msg.size() == 1 && msg.match_element<caf::ok_atom>(0)) {
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
  settings.placement = "round_robin";
  auto run = spawn_local_cluster(sys, settings, runtime_settings{}, 2, 3,
                                 synthetic_data(),
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
  BOOST_TEST(ps0.variables[0] == "softmax/weights");
  BOOST_TEST(ps0.variable_in[0] == ps0.bytes_in);
  BOOST_TEST(result.traffic[1].bytes_in == 10u * 10u * 4u);
  BOOST_TEST(result.ps_imbalance > 1.99);
  BOOST_TEST(result.traffic_json().find("\"softmax/biases\":{\"in\":400,") != std::string::npos,
             result.traffic_json());
}

BOOST_AUTO_TEST_CASE(a_lost_worker_does_not_stop_training) {
  training_result result;
  auto run = spawn_local_cluster(sys, small_settings(20), runtime_settings{}, 1, 2,
                                 synthetic_data(), [&](const training_result& r) { result = r; },
                                 spawn_mode::cooperative);
  int reports = 0;
  auto* w1 = raw(run.workers[1]);
  bool killed = false;
  run_observed(sched, [&](caf::abstract_actor*, const caf::type_erased_tuple& msg) {
    // Kill worker 1 while it holds a grant (after a few reports).
    if (msg.match_element<report_atom>(0) && ++reports == 5 && !killed) {
      killed = true;
      caf::anon_send_exit(caf::actor_cast<caf::actor>(w1), caf::exit_reason::kill);
    }
  });
  BOOST_TEST(killed);
  BOOST_TEST(result.ok);
  BOOST_TEST(result.global_step == 20);
}

BOOST_AUTO_TEST_CASE(non_finite_gradients_are_refused_then_the_run_fails) {
  training_result result;
  runtime_settings runtime;
  runtime.max_refused_steps = 3;
  auto baseline = sys.registry().running();
  auto run = spawn_local_cluster(sys, small_settings(10), runtime, 1, 1, synthetic_data(true),
                                 [&](const training_result& r) { result = r; },
                                 spawn_mode::cooperative);
  sched.run();
  BOOST_TEST(!result.ok);
  BOOST_TEST(result.refused_steps == 4);
  BOOST_TEST(result.global_step == 0);
  BOOST_TEST(result.error.find("diverged") != std::string::npos);
  BOOST_TEST(sys.registry().running() == baseline);
}

// A plan whose slices of a variable overlap and leave a gap, though their row
// counts add up, is refused by the worker: it stops with an error instead of
// training rows it never pulls (which a GPU worker's buffers would not hold).
BOOST_AUTO_TEST_CASE(a_plan_that_does_not_tile_a_variable_is_refused) {
  auto settings = small_settings(4);  // softmax: weights [784, 10], biases [10]
  training_plan plan;
  plan.variables = {"softmax/weights/part_0", "softmax/weights/part_1", "softmax/biases"};
  plan.shard_of = {0, 0, 0};
  plan.variable_of = {0, 0, 1};
  plan.axis_of = {0, 0, 0};
  plan.offset_of = {0, 0, 0};  // rows 0..391 twice, 392..783 never
  plan.rows_of = {392, 392, 10};
  auto chief = sys.spawn([plan](chief_actor::pointer) -> chief_actor::behavior_type {
    return {
      [](hello_atom, uint32_t v, const std::string&, int32_t) -> caf::result<uint32_t> {
        return v;
      },
      [plan](ready_atom, int32_t) -> caf::result<training_plan> { return plan; },
      [](report_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
      [](step_done_atom, const step_summary&) {},
      [](tick_atom) {},
    };
  });
  auto shard = spawn_ps_shard(sys, 0, settings);
  auto worker = spawn_worker(sys, 0, 1, settings, runtime_settings{}, chief, {shard},
                             synthetic_data().train, spawn_mode::cooperative);
  self->monitor(worker);
  sched.run();
  caf::error reason;
  bool down = false;
  self->receive([&](caf::down_msg& msg) {
    down = true;
    reason = msg.reason;
  }, caf::after(std::chrono::seconds(0)) >> [] {});
  BOOST_REQUIRE(down);
  BOOST_TEST(is(reason, errc::invalid_request), caf::to_string(reason));
  BOOST_TEST(caf::to_string(reason).find("do not cover softmax/weights exactly once")
               != std::string::npos,
             caf::to_string(reason));
}

BOOST_AUTO_TEST_SUITE_END()
