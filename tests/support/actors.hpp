#pragma once
// Helpers shared by the deterministic actor tests: small settings, stand-ins
// for the chief and the token queue, and a loop that shows every message to
// the test before it is processed.
#include <memory>
#include <optional>
#include <vector>

#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/reports.hpp"
#include "tests/support/synthetic_data.hpp"

namespace troupe::testing {

using names = std::vector<std::string>;

/// Async softmax, batch 4, SGD 0.1, no progress lines.
inline training_settings small_settings(int64_t last_step) {
  training_settings s;
  s.batch_size = 4;
  s.last_step = last_step;
  s.log_interval = 0;
  s.optimizer = plain_sgd(0.1);
  return s;
}

/// Sync, fixed data order, SGD 0.1; replicas 0 means R = N.
inline training_settings sync_settings(int64_t last_step, int64_t batch, int64_t replicas = 0) {
  auto s = small_settings(last_step);
  s.mode = update_mode::sync;
  s.batch_size = batch;
  s.shuffle = false;
  s.replicas_to_aggregate = replicas;
  return s;
}

template <class Handle>
caf::abstract_actor* raw(const Handle& h) {
  return caf::actor_cast<caf::abstract_actor*>(h);
}

/// Runs every actor until idle, one message at a time, handing each message
/// and its receiver to `observe` before it is processed.
template <class F>
void run_observed(caf::scheduler::test_coordinator& sched, F observe) {
  while (sched.has_job()) {
    auto& next = sched.next_job<caf::scheduled_actor>();
    if (auto* element = next.mailbox().peek())
      observe(static_cast<caf::abstract_actor*>(&next), element->content());
    sched.run_once();
  }
}

/// What a shard told the token queue.
struct applied_event {
  int32_t shard;
  int64_t step;
};

/// Stands in for the token queue: records what shards report.
inline token_queue_actor::behavior_type spy_queue(token_queue_actor::pointer,
                                                  std::shared_ptr<std::vector<applied_event>> log) {
  return {
    [](report_atom, const step_report&) -> caf::result<step_grant> { return step_grant{}; },
    [log](applied_atom, run_id, int32_t shard, int64_t step, double) {
      log->push_back({shard, step});
    },
    [](admit_atom, int32_t, const worker_actor&) {},
    [](stop_atom) {},
  };
}

/// A sync shard's options: R = 2 up to step 10 from `first_step`,
/// completed steps reported to `queue`.
inline shard_options sync_shard_options(token_queue_actor queue, int64_t first_step = 0) {
  shard_options options;
  options.sync = true;
  options.replicas_to_aggregate = 2;
  options.last_step = 10;
  options.token_queue = std::move(queue);
  options.first_step = first_step;
  return options;
}

/// A chief of `workers` workers over `shards` on the test coordinator; its
/// result lands in `result` (which must outlive the run).
inline chief_actor cooperative_chief(caf::actor_system& sys, const training_settings& settings,
                                     int32_t workers, std::vector<ps_shard_actor> shards,
                                     const training_data& data, training_result& result,
                                     const runtime_settings& runtime = {}) {
  return spawn_chief(
    sys, settings, runtime, workers, std::move(shards), data.test,
    [&result](const training_result& r) { result = r; }, spawn_mode::cooperative);
}

using grant_slot = std::shared_ptr<std::optional<step_grant>>;

/// A whole cluster on the test coordinator (spawn_mode::cooperative): its
/// actors run when the test runs the scheduler, and its result lands in
/// `result` (which must outlive the run).
inline local_cluster
cooperative_cluster(caf::actor_system& sys, const training_settings& settings, int32_t shards,
                    int32_t workers, training_result& result,
                    const training_data& data = synthetic_data(),
                    const runtime_settings& runtime = {},
                    std::shared_ptr<const checkpoint_reader> restore_from = nullptr) {
  return spawn_local_cluster(
    sys, settings, runtime, shards, workers, data,
    [&result](const training_result& r) { result = r; }, spawn_mode::cooperative,
    std::move(restore_from));
}

} // namespace troupe::testing
