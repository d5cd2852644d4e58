// train.pull-ahead through whole clusters on CAF's test_coordinator: each
// step's values are pulled while the step before computes and pushes, so
// they hold every update but the worker's own last one (one step staler);
// exactly last_step updates are still counted, and sync mode refuses it.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

struct observed_run {
  training_result result;
  std::vector<int64_t> pulled_versions; // the versions a worker received, in order
};

observed_run train_one_worker(deterministic_fixture& f, bool pull_ahead, int64_t last_step) {
  auto settings = small_settings(last_step);
  settings.pull_ahead = pull_ahead;
  observed_run out;
  auto run = cooperative_cluster(f.sys, settings, 1, 1, out.result);
  auto* worker = raw(run.workers[0]);
  run_observed(f.sched, [&](caf::abstract_actor* who, const caf::type_erased_tuple& msg) {
    if (who == worker && msg.match_element<pull_reply>(0))
      out.pulled_versions.push_back(msg.get_as<pull_reply>(0).version);
  });
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(pull_ahead, deterministic_fixture)

BOOST_AUTO_TEST_CASE(without_it_each_step_starts_from_every_update_before_it) {
  auto run = train_one_worker(*this, false, 12);
  BOOST_TEST(run.result.ok, run.result.error);
  BOOST_TEST(run.result.global_step == 12);
  BOOST_REQUIRE(run.pulled_versions.size() >= 12u);
  for (int64_t s = 0; s < 12; ++s)
    BOOST_TEST(run.pulled_versions[static_cast<size_t>(s)] == s, "step " << s);
}

BOOST_AUTO_TEST_CASE(with_it_each_step_misses_only_the_workers_own_last_update) {
  auto run = train_one_worker(*this, true, 12);
  BOOST_TEST(run.result.ok, run.result.error);
  BOOST_TEST(run.result.global_step == 12);
  // Step 0 pulls as usual; step s >= 1 uses values pulled while step s-1
  // computed: version s-1, one behind.
  BOOST_REQUIRE(run.pulled_versions.size() >= 12u);
  BOOST_TEST(run.pulled_versions[0] == 0);
  for (int64_t s = 1; s < 12; ++s)
    BOOST_TEST(run.pulled_versions[static_cast<size_t>(s)] == s - 1, "step " << s);
}

BOOST_AUTO_TEST_CASE(several_workers_count_exactly_last_step_updates) {
  auto settings = small_settings(30);
  settings.pull_ahead = true;
  training_result result;
  cooperative_cluster(sys, settings, 2, 3, result);
  sched.run();
  BOOST_TEST(result.ok, result.error);
  BOOST_TEST(result.global_step == 30);
}

BOOST_AUTO_TEST_CASE(sync_mode_refuses_it_by_name) {
  auto settings = sync_settings(10, 4);
  settings.pull_ahead = true;
  auto problems = check_settings(settings, runtime_settings{}, {1, 2});
  BOOST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].message.find("train.pull-ahead") != std::string::npos);
  settings.mode = update_mode::async;
  BOOST_TEST(check_settings(settings, runtime_settings{}, {1, 2}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
