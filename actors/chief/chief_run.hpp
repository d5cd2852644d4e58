#pragma once
// Internal to the chief: what its files share. chief_init.cpp places the
// variables and initialises the shards; chief_workers.cpp admits workers and
// handles their losses; chief.cpp runs training (steps, the watchdog);
// chief_end.cpp ends a run (final values, evaluation, traffic, the checks of
// the result, stopping everyone); async_steps.cpp and sync_steps.cpp advance
// the global steps (step_coordination.hpp).
#include <functional>
#include <string>
#include <vector>

#include "actors/chief/chief.hpp"
#include "actors/chief/step_coordination.hpp"

namespace troupe::chief_run {

inline int64_t global_step(self_ptr self) {
  return self->state.steps->global_step();
}

/// Starts the examples/s clock (once): at the first grant (async) or when
/// the shards are initialised (sync).
inline void start_clock(self_ptr self) {
  auto& st = self->state;
  if (st.started)
    return;
  st.started = chief_state::clock::now();
  st.progress.restart(*st.started);
}

/// An update was counted (its loss and examples are in the progress meter):
/// the progress line, a checkpoint or an evaluation when due.
void update_counted(self_ptr self);

/// Places the variables, then initialises every shard exactly once with
/// values derived from the seed (a shard holding nothing gets an empty init);
/// the waiting workers get the plan when the last shard acknowledged.
void initialize_shards(self_ptr self);

/// The plan worker `index` gets (once initialised), with where it continues
/// in its data.
training_plan plan_message(self_ptr self, int32_t index);

/// A worker's ready request: admitted for a free index of the cluster (or
/// the one it holds); for an index another worker holds, only once a probe
/// shows that one gone. Answers with the plan once the shards are
/// initialised.
caf::result<training_plan> on_ready(self_ptr self, int32_t index);

/// train.model = declared: the model is its workers' programs'.
bool declared_run(self_ptr self);
/// A ready request with the worker program's declaration: the first one
/// accepted is placed and initialised; later ones must equal it (refused,
/// naming the difference); then as on_ready.
caf::result<training_plan> on_declared_ready(self_ptr self, int32_t index,
                                             model_declaration& declaration);
/// A ready request without a declaration: refused in a declared run, else on_ready.
caf::result<training_plan> on_undeclared_ready(self_ptr self, int32_t index);
/// Metrics a worker's program reported (w.report): the last value of each
/// name goes into the final line.
void on_metrics(self_ptr self, const reported_metrics& m);

/// Worker `index` went down: lost (the others carry on) or failed.
void on_worker_down(self_ptr self, int32_t index, const caf::error& reason);

/// Refuses a report (or non-finite gradient) that is not from the worker
/// admitted under its index, or not of this run.
caf::error unless_admitted(self_ptr self, const step_report& r, const char* what);
/// A report of an applied step without every shard's receipt for it: the
/// worker did not push the step. It is dropped from the run and named, its
/// steps go to the others, and the report is refused (an error); none when
/// the report shows its receipts.
caf::error unless_proven(self_ptr self, const step_report& r);

/// Async with workers in other processes (links.bulk.chief_host set): the
/// report channel's server on the chief's host; none (reports over BASP,
/// with a warning) where it cannot listen.
void open_report_desk(self_ptr self);
/// A batch relayed from report connection `key`: settled as the same batch
/// over BASP would be, and answered on that connection, now or once parked.
void on_relayed(self_ptr self, uint64_t key, uint64_t request, std::vector<step_report>& reports);
/// Where a reply parked now goes: the relayed batch under way (null when
/// none is, and the reply is a response promise).
std::function<void(const std::vector<step_grant>&)> relayed_reply(self_ptr self);

/// last_step reached: reads the final values, has them evaluated, collects
/// the shards' traffic, reports the result and stops every task.
void finish(self_ptr self);

/// Reads every variable's current value from the shards (in model order);
/// `failed` gets the first problem instead. On the bulk path from shards
/// that offer it (chief_read.cpp), over BASP from the others.
void read_values(self_ptr self, std::function<void(std::vector<tensor>)> done,
                 std::function<void(const std::string&)> failed);

/// A score on the test set: the mean loss and how many examples were right.
struct test_score {
  double loss = 0;
  uint64_t correct = 0;
  uint64_t examples = 0;
  double auc = -1;     ///< binary classification with an embedding table; else -1
  double logloss = -1; ///< the same
  double accuracy() const { return examples ? static_cast<double>(correct) / examples : 0.0; }
};
/// The one evaluation path: `values` (every variable's, in model order)
/// scored on the test set by `net` on an actor of its own, so the chief's
/// mailbox keeps being served while it computes.
void score_on_test_set(self_ptr self, std::shared_ptr<model> net, std::vector<tensor> values,
                       std::function<void(const test_score&)> scored,
                       std::function<void(const caf::error&)> failed);
/// "test_accuracy=0.8123 test_loss=0.5021" (test_rmse for regression), for log lines.
std::string score_text(self_ptr self, const test_score& score);

/// train.eval-interval: every so many global steps, evaluates the current
/// values on the evaluation set on an actor of its own and logs the result
/// (one evaluation at a time; the steps go on meanwhile).
void maybe_evaluate(self_ptr self);

// -- TensorBoard (chief_summaries.cpp; checkpoint.summaries) --

/// Opens the event file in the log directory (when there is one).
void open_summaries(self_ptr self);
/// A progress line's figures: loss, accuracy or RMSE, examples/s, steps/s,
/// the learning rate, dropped or refused gradients, straggler time.
void summarize_progress(self_ptr self, const progress_line& line);
void summarize_checkpoint(self_ptr self, int64_t step, double seconds, uint64_t bytes);
void summarize_evaluation(self_ptr self, int64_t step, const test_score& score);
/// data.follow: the score of the stream's next file before it is trained on.
void summarize_progressive(self_ptr self, int64_t step, const test_score& score);
/// Per shard: bytes in and out, pulls and pushes; the imbalance.
void summarize_traffic(self_ptr self, const training_result& result);
/// Every few seconds (the watchdog), and once at the end.
void flush_summaries(self_ptr self);
void close_summaries(self_ptr self);

/// Fails the run: reports the error and ends every task with user_shutdown.
void abort_run(self_ptr self, const std::string& why, run_end kind = run_end::failed);

/// A shard went down (after the stop, or as a failure).
void on_shard_down(self_ptr self, size_t shard, const caf::error& reason);

/// Quits with the run's exit reason (once the stop is sent), ending the token queue.
void quit(self_ptr self);

/// A fresh identity for a run, or for its next incarnation after a
/// recovery: messages of the one before are refused.
run_id draw_run_id();

// -- recovery (chief_recovery.cpp) --

/// A shard was lost while training: with checkpoints and a way to reach it
/// again, training pauses until it is back and every shard is restored from
/// the latest checkpoint; otherwise the run ends.
void on_shard_lost(self_ptr self, size_t shard, const caf::error& reason);
/// The lost shard answers again: restore every shard, re-plan the workers.
void on_shard_back(self_ptr self, int32_t shard, ps_shard_actor handle);
/// It did not come back within cluster.recovery-timeout: the run ends.
void on_shard_not_back(self_ptr self, int32_t shard, const std::string& why);

// -- checkpoints (chief_checkpoint.cpp) --

/// A save is due (by time or steps): async, the fence begins (no new
/// grants until every granted step is in); sync, the shards copy their
/// state after the next-but-one update. Called after every counted step.
void maybe_save(self_ptr self);
/// Async: the fence is complete when no granted step is outstanding; then
/// the shards are asked for their copies. Called whenever a grant ends.
void on_grant_settled(self_ptr self);
/// The checkpoint writer's report.
void on_saved(self_ptr self, int64_t step, bool ok, const std::string& what, uint64_t bytes,
              double seconds);
/// SIGTERM (a preemption): save a checkpoint at one consistent step, then
/// stop every task normally; the final line says preempted.
void on_preempted(self_ptr self);
/// The end of a preempted run: reports it and stops every task normally.
/// The cluster stops after a SIGTERM; `why` replaces "stopped by SIGTERM at
/// step N" in the final line's error when given.
void stop_preempted(self_ptr self, const std::string& why = {});

/// Nothing to train (restored at last_step): finishes once every worker has
/// connected (so that finish stops it), or cluster.connect-timeout after start.
void finish_when_every_worker_came(self_ptr self);
/// The end of the run: saves the final checkpoint (if checkpoints are on),
/// then calls `then`.
void save_final_then(self_ptr self, std::function<void()> then);
/// Values, optimizer slots and data positions of the checkpoint to restore,
/// sent to the shards after their init; calls `done` once all are in.
void restore_slots(self_ptr self, std::function<void()> done);
/// The checkpoint's embedding rows, each into the shard that owns its bucket
/// now, read and sent a batch at a time; then `done`. A table that does not
/// fit (checkpoint_error) or a refused batch aborts the run.
void restore_tables(self_ptr self, std::function<void()> done);

} // namespace troupe::chief_run
