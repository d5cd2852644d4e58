// The worker actor, on CAF's test_coordinator.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

BOOST_FIXTURE_TEST_SUITE(worker_tests, deterministic_fixture)

// A plan whose slices of a variable overlap and leave a gap, though their row
// counts add up, is refused by the worker: it stops with an error instead of
// training rows it never pulls (which a GPU worker's buffers would not hold).
BOOST_AUTO_TEST_CASE(a_plan_that_does_not_tile_a_variable_is_refused) {
  auto settings = small_settings(4); // softmax: weights [784, 10], biases [10]
  training_plan plan;
  plan.slices = {{"softmax/weights/part_0", 0, 0, 0, 0, 392}, // rows 0..391 twice,
                 {"softmax/weights/part_1", 0, 0, 0, 0, 392}, // 392..783 never
                 {"softmax/biases", 0, 1, 0, 0, 10}};
  auto chief = sys.spawn([plan](chief_actor::pointer) -> chief_actor::behavior_type {
    return {
      [](hello_atom, uint32_t v, const std::string&, int32_t) -> caf::result<uint32_t> {
        return v;
      },
      [plan](ready_atom, int32_t) -> caf::result<training_plan> { return plan; },
      [plan](ready_atom, int32_t, const model_declaration&) -> caf::result<training_plan> {
        return plan;
      },
      [](metrics_atom, const reported_metrics&) {},
      [](report_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
      [](reports_atom, const std::vector<step_report>&) -> caf::result<std::vector<step_grant>> {
        return std::vector<step_grant>{};
      },
      [](nonfinite_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
      [](idle_atom, const step_report&) {},
      [](step_done_atom, const step_summary&) {},
      [](follow_atom) -> caf::result<checkpoint_source_actor> { return checkpoint_source_actor{}; },
    };
  });
  auto shard = spawn_ps_shard(sys, 0, settings);
  auto worker = spawn_worker(sys, 0, 1, settings, runtime_settings{}, chief, {shard},
                             synthetic_data().train, spawn_mode::cooperative);
  self->monitor(worker);
  sched.run();
  caf::error reason;
  bool down = false;
  self->receive(
    [&](caf::down_msg& msg) {
      down = true;
      reason = msg.reason;
    },
    caf::after(std::chrono::seconds(0)) >> [] {});
  BOOST_REQUIRE(down);
  BOOST_TEST(is(reason, errc::invalid_request), caf::to_string(reason));
  BOOST_TEST(caf::to_string(reason).find("do not cover softmax/weights exactly once")
               != std::string::npos,
             caf::to_string(reason));
}

BOOST_AUTO_TEST_SUITE_END()
