#pragma once
// The worker's step, shared by its two files (internal to the worker, not
// part of the library API): worker.cpp runs the plain loop (pull, compute,
// push, report) and the actor; pull_ahead.cpp runs train.pull-ahead's jobs.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/worker/worker.hpp"

namespace troupe::worker_steps {

using self_ptr = worker_impl::stateful_pointer<worker_state>;

// -- worker.cpp ----------------------------------------------------------------

/// A peer is gone or a request failed: the worker waits for the run to
/// recover (or stops, when it cannot reconnect).
void wait_for_recovery(self_ptr self, const std::string& why, const caf::error& err);
/// The step under way is over: on to the next one held, through the mailbox.
void step_over(self_ptr self);
/// A pulled part into the parameters; false (the worker stops) when it does not fit.
bool take_pulled(self_ptr self, const slice_router::shard_part& part, std::vector<tensor>& values);
/// The bulk link to a shard (null: that shard over BASP).
bulk_link* bulk_link_to(self_ptr self, int32_t shard);
/// Whether plan slice `slice` is a whole variable.
bool whole_variable(const slice_router& router, size_t slice);
/// A failed bulk exchange as an error: the shard's refusal, or a broken link
/// (dropped) as a lost peer's.
caf::error bulk_failure(std::vector<std::unique_ptr<bulk_link>>& links, int32_t shard);
/// A step's pushes are all answered: count it, then report it.
void count_and_report(self_ptr self, const step_report& report);
/// A refused push part marks `report` not applied; false (recovery started)
/// for an error that is not a refusal.
bool on_push_refused(self_ptr self, int32_t shard, const caf::error& err, step_report& report);
/// A pushed part's whole-variable gradients back into `into`, for reuse.
void return_gradients(self_ptr self, const slice_router::shard_part& part,
                      std::vector<tensor>& sent, std::vector<tensor>& into);
/// The current step's gradient was not finite: nothing pushed, the chief decides.
void report_nonfinite(self_ptr self);

// -- pull_ahead.cpp ------------------------------------------------------------

/// Starts the job of the step just computed: its pushes when `with_pushes`,
/// then the pulls of the step after next.
void start_job(self_ptr self, bool with_pushes);
/// Waits for the job, then reports its step and takes the values it pulled;
/// `then` runs unless the run had to recover.
void collect_job(self_ptr self, std::function<void()> then);
/// Step s is computed: the last job collected, this step's started.
void on_computed_ahead(self_ptr self, bool pushable);
/// A job under way is void (a lost peer, a new plan).
void drop_job(self_ptr self);

} // namespace troupe::worker_steps
