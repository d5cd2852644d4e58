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

namespace troupe::testing {

using names = std::vector<std::string>;

/// The run tests initialise shards for.
constexpr run_id test_run = 7;

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

using grant_slot = std::shared_ptr<std::optional<step_grant>>;

inline step_report report(int32_t worker, int64_t step, bool applied = true) {
  step_report r;
  r.run = test_run;
  r.worker = worker;
  r.step = step;
  r.applied = applied;
  r.examples = 4;
  return r;
}

} // namespace troupe::testing
