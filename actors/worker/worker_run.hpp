#pragma once
// Internal to the worker: what its files share. worker.cpp is the actor
// (its state set up, its handlers and behaviour); worker_steps.cpp runs the
// granted steps through the step pipeline; worker_plan.cpp takes the chief's
// plan and opens the bulk links; worker_recovery.cpp waits for a lost shard
// or chief to come back.
#include <string>
#include <vector>

#include <caf/system_messages.hpp>

#include "actors/worker/worker.hpp"

namespace troupe::worker_run {

using self_ptr = worker_impl::stateful_pointer<worker_state>;

/// Logs `what` and ends the worker with `err` (its task exits non-zero).
void fail(self_ptr self, const std::string& what, const caf::error& err,
          run_end kind = run_end::failed);

/// From the chief, or from this process (its SIGTERM relay or a helper).
bool from_chief_or_here(self_ptr self, const caf::strong_actor_ptr& source);

// -- steps (worker_steps.cpp) --

/// What the step pipeline calls back: compute, report, recover, fail.
step_hooks hooks_of(self_ptr self);
/// Training starts: ask for as many steps as the lease allows.
void ask_for_first_steps(self_ptr self);
/// Starts the next granted step, unless one is under way or none is granted
/// (or the worker is leaving: then it quits once none is under way).
void start_next_step(self_ptr self);
/// SIGTERM (a scale-down): the step under way is pushed and reported, then
/// the worker ends normally, which the chief takes as leaving the run.
void leave(self_ptr self);

// -- reports (worker_reports.cpp) --

/// One step's report to the coordinator (train.report-every = 1, and the
/// first asks); the grant answering it starts the next step.
void report_step(self_ptr self, const step_report& report);
/// The pending reports (at least an ask) to the chief in one batch
/// (train.report-every > 1); the grants fill the lease again.
void send_reports(self_ptr self);
/// A non-finite gradient, to the chief (over BASP).
void report_nonfinite(self_ptr self);
/// The report channel the plan offers (async, a chief in another process),
/// replacing the plan before's; without one, or where it cannot connect (a
/// warning), reports go over BASP.
void open_report_line(self_ptr self, const training_plan& plan);
/// The report channel's answer to request `request`, or its loss.
void on_line_grants(self_ptr self, uint64_t key, uint64_t request, std::vector<step_grant>& grants);
void on_line_lost(self_ptr self, uint64_t key, const std::string& why);

// -- the plan (worker_plan.cpp) --

/// Asks the chief for the plan (once it has initialised the shards).
void ask_for_plan(self_ptr self);
/// The chief restored the run (a lost shard, or a new chief): a new plan.
void on_restored_plan(self_ptr self, training_plan& plan);
/// Its chief: workers joined or left; read share `rank` of `count` from the
/// next epoch on.
void on_share(self_ptr self, int32_t rank, int32_t count);

// -- recovery (worker_recovery.cpp) --

/// A peer is gone or a request of the run failed: wait for the run to
/// recover (a new plan, or the restarted chief), or fail without a way to.
void wait_for_recovery(self_ptr self, const std::string& why, const caf::error& err);
/// Reconnects to the shards lost since the last plan; false (failed) if one stays away.
bool reconnect_lost_shards(self_ptr self);
/// A peer's end: the chief's normal end is the run's; anything else starts recovery.
void on_down(self_ptr self, const caf::down_msg& msg);
/// The chief was lost: a helper looks for the restarted one.
void rejoin(self_ptr self);
/// The chief answers again: ask it for the plan, as at the start.
void on_chief_back(self_ptr self, const chief_actor& chief);
/// Waiting for the run to recover lasts at most cluster.recovery-timeout.
void on_tick(self_ptr self);

} // namespace troupe::worker_run
