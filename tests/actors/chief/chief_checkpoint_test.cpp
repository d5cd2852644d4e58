// The chief's checkpoints and restore through whole clusters on CAF's
// test_coordinator: every save copies every shard at the same version (the
// fence), the writer's files restore onto another number of shards, and the
// restored run continues from the checkpoint's step with its slots.
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

struct log_dir {
  std::string root =
    (fs::temp_directory_path() / ("troupe-chief-ckpt-" + std::to_string(::getpid()))).string();
  log_dir() { fs::remove_all(root); }
  ~log_dir() { fs::remove_all(root); }
};

training_settings with_checkpoints(int64_t last_step, const std::string& dir) {
  auto s = small_settings(last_step);
  s.optimizer.kind = optimizer_kind::adam;
  s.optimizer.learning_rate.base = 0.01;
  s.checkpoint.log_dir = dir;
  s.checkpoint.save_interval = std::chrono::milliseconds(0);
  s.checkpoint.save_steps = 10;
  s.checkpoint.keep = 3;
  return s;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(chief_checkpoints, deterministic_fixture)

// Issue 52: a worker that reported steps applied without pushing them left
// the shards one update short of the chief's count; the next checkpoint
// waited for that update forever and every task exited 1. A report of an
// applied step must show every shard's receipt for it: the liar is dropped
// and named at its first lie, its steps go to the honest worker, and the
// run, checkpoints and all, finishes with exactly last_step updates.
BOOST_AUTO_TEST_CASE(a_worker_that_reports_steps_it_never_pushed_is_dropped_and_the_run_goes_on) {
  log_dir dir;
  auto settings = with_checkpoints(30, dir.root);
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings);
  training_result result;
  auto chief = cooperative_chief(sys, settings, 2, {shard}, data, result);
  auto lies = std::make_shared<int>(0);
  auto told = std::make_shared<std::string>();
  // Worker 1 asks for steps and reports each granted one applied, with no
  // push and no receipt.
  auto liar = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(chief, caf::infinite, ready_atom::value, int32_t{1})
      .then([=](const training_plan& plan) {
        auto report = [=](int64_t step) {
          step_report r;
          r.run = plan.run;
          r.worker = 1;
          r.step = step;
          r.applied = step >= 0;
          r.examples = 4;
          if (step >= 0)
            ++*lies;
          return r;
        };
        auto lie = std::make_shared<std::function<void(int64_t)>>();
        *lie = [=](int64_t step) {
          self->request(chief, caf::infinite, report_atom::value, report(step))
            .then(
              [=](const step_grant& g) {
                if (!g.stop)
                  (*lie)(g.step); // it is a worker: it keeps asking
              },
              [](caf::error&) {});
        };
        (*lie)(-1);
      });
    return {[=](stop_atom, int32_t, const std::string& why) { *told = why; }, [](hello_atom) {}};
  });
  sched.run();
  spawn_worker(sys, 0, 2, settings, runtime_settings{}, chief, {shard}, data.train,
               spawn_mode::cooperative);
  sched.run();
  BOOST_TEST(*lies >= 1);
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 30);
  BOOST_REQUIRE(result.traffic.size() == 1u);
  BOOST_TEST(result.traffic[0].updates == 30); // every counted step applied, once
  BOOST_REQUIRE(result.dropped_workers.size() == 1u);
  BOOST_TEST(result.dropped_workers[0].find("worker:1 reported step") == 0u,
             result.dropped_workers[0]);
  BOOST_TEST(result.to_json().find("\"dropped_workers\":[\"worker:1") != std::string::npos);
  BOOST_TEST(told->find("the chief dropped this worker") != std::string::npos, *told);
  BOOST_TEST(checkpoint_dir(dir.root).complete().size() >= 2u); // saves went on
  caf::anon_send_exit(liar, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(every_save_copies_every_shard_at_one_version_and_restores_onto_three) {
  log_dir dir;
  training_result first;
  auto run = cooperative_cluster(sys, with_checkpoints(40, dir.root), 2, 3, first);
  // version -> the shards asked to copy at it
  std::map<int64_t, std::set<caf::abstract_actor*>> copies;
  std::set<caf::abstract_actor*> shards{raw(run.shards[0]), raw(run.shards[1])};
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<snapshot_atom>(0))
      copies[msg.get_as<int64_t>(2)].insert(who);
  });
  BOOST_TEST(first.ok, first.error);
  BOOST_TEST(first.global_step == 40);
  // A save every 10 steps, each landing once the steps leased at its trigger
  // are in (up to 2 per worker: 16, then 35 here), and the end.
  BOOST_REQUIRE(copies.size() >= 3u);
  for (auto& [version, who] : copies)
    BOOST_TEST((who == shards), "both shards copy at version " << version);
  checkpoint_dir saved(dir.root);
  BOOST_REQUIRE(saved.latest());
  BOOST_TEST(*saved.latest() == dir.root + "/ckpt-40");
  BOOST_TEST(saved.complete().size() == 3u); // keep = 3
  auto reader = std::make_shared<checkpoint_reader>(*saved.latest());
  BOOST_TEST(reader->slots_of("softmax/weights") == (std::vector<std::string>{"Adam", "Adam_1"}));

  // The same model on three shards, from step 40 to 60.
  training_result second;
  std::map<caf::abstract_actor*, int64_t> first_steps;
  int slots_restored = 0;
  auto again = cooperative_cluster(sys, with_checkpoints(60, dir.root), 3, 2, second,
                                   synthetic_data(), {}, reader);
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<init_atom>(0))
      first_steps[who] = msg.get_as<shard_options>(4).first_step;
    if (msg.match_element<restore_atom>(0))
      ++slots_restored;
  });
  BOOST_TEST(second.ok, second.error);
  BOOST_TEST(second.global_step == 60);
  BOOST_TEST(second.examples == 20u * 4u); // only the 20 steps after the checkpoint
  int holding = 0;
  for (auto& [who, step] : first_steps)
    holding += step == 40 ? 1 : 0;
  BOOST_TEST(holding >= 2);        // every shard holding variables starts at step 40
  BOOST_TEST(slots_restored >= 4); // Adam's two slots of weights and biases, per slice
  BOOST_TEST(*checkpoint_dir(dir.root).latest() == dir.root + "/ckpt-60");
}

// train.report-every = 4: a worker holds up to 5 steps and reports 4 at a
// time; each save's fence still waits until every granted step is in, so
// every shard copies at the version the checkpoint is named after.
BOOST_AUTO_TEST_CASE(batched_reports_keep_every_save_at_one_version) {
  log_dir dir;
  auto settings = with_checkpoints(40, dir.root);
  settings.report_every = 4;
  training_result result;
  auto run = cooperative_cluster(sys, settings, 2, 3, result);
  std::map<int64_t, std::set<caf::abstract_actor*>> copies;
  std::set<caf::abstract_actor*> shards{raw(run.shards[0]), raw(run.shards[1])};
  run_observed(sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (msg.match_element<snapshot_atom>(0))
      copies[msg.get_as<int64_t>(2)].insert(who);
  });
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 40);
  BOOST_REQUIRE(copies.size() >= 2u);
  for (auto& [version, who] : copies)
    BOOST_TEST((who == shards), "both shards copy at version " << version);
  for (auto& path : checkpoint_dir(dir.root).complete()) {
    auto step = std::stoll(path.substr(path.rfind('-') + 1));
    BOOST_TEST(copies.count(step) == 1u, path << " was copied at its step");
  }
}

// Sync: the workers' data positions reach the checkpoint through the token
// queue, and a save waits for an update instead of pausing anyone.
BOOST_AUTO_TEST_CASE(a_sync_checkpoint_holds_every_workers_data_position) {
  log_dir dir;
  auto settings = with_checkpoints(30, dir.root);
  settings.mode = update_mode::sync;
  training_result result;
  cooperative_cluster(sys, settings, 2, 2, result);
  sched.run();
  BOOST_TEST(result.ok, result.error);
  checkpoint_reader last(*checkpoint_dir(dir.root).latest());
  BOOST_TEST(last.manifest().step == 30);
  BOOST_REQUIRE(last.manifest().data.size() == 2u);
  for (auto& p : last.manifest().data)
    BOOST_TEST(p.epoch * 20 + p.offset >= 30u * 4u / 2u); // each read ~half of 30 x 4 examples
}

// Issue 52: a worker that held its granted steps and reported nothing,
// while still connected, held up the next checkpoint and the run's end
// until every task timed out (request-timeout + worker-wait-timeout). Its
// lease expires after cluster.step-lease-timeout: its steps go to the other
// worker, the shards refuse its pushes of them, and the run, checkpoints
// and all, ends with exactly last_step updates and names the slow worker.
BOOST_AUTO_TEST_CASE(a_worker_that_holds_its_steps_loses_them_and_the_run_goes_on) {
  log_dir dir;
  auto settings = with_checkpoints(30, dir.root);
  runtime_settings runtime;
  runtime.step_lease_timeout = std::chrono::milliseconds(1000);
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings);
  training_result result;
  bool finished = false;
  auto chief = spawn_chief(
    sys, settings, runtime, 2, {shard}, data.test,
    [&](const training_result& r) { result = r, finished = true; }, spawn_mode::cooperative);
  auto held = std::make_shared<std::vector<int64_t>>();
  // Worker 1 asks for its two steps, then holds them and says nothing.
  auto stuck = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(chief, caf::infinite, ready_atom::value, int32_t{1})
      .then([=](const training_plan& plan) {
        for (int ask = 0; ask < 2; ++ask)
          self->request(chief, caf::infinite, report_atom::value, step_report{plan.run, 1, -1})
            .then([=](const step_grant& g) { held->push_back(g.step); }, [](caf::error&) {});
      });
    return {[](stop_atom) {}, [](stop_atom, int32_t, const std::string&) {}};
  });
  sched.run();
  spawn_worker(sys, 0, 2, settings, runtime, chief, {shard}, data.train, spawn_mode::cooperative);
  for (int tick = 0; tick < 30 && !finished; ++tick) {
    sched.run(); // until the run waits for the held steps
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The chief's watchdog tick, as its timer sends it (firing every timer
    // would time the waiting worker's request out too).
    caf::anon_send(caf::actor_cast<caf::actor>(chief), tick_atom::value);
  }
  sched.run();
  caf::anon_send_exit(stuck, caf::exit_reason::user_shutdown);
  BOOST_REQUIRE(finished);
  BOOST_TEST(held->size() == 2u);
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 30);
  BOOST_REQUIRE(result.traffic.size() == 1u);
  BOOST_TEST(result.traffic[0].updates == 30);
  BOOST_TEST(result.expired_leases == 1u);
  BOOST_TEST(checkpoint_dir(dir.root).complete().size() >= 2u); // the saves went on
}

BOOST_AUTO_TEST_SUITE_END()
