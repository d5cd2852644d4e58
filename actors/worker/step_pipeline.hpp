#pragma once
// A worker's step between the grant and the report: the values pulled, the
// step computed (by the actor), the gradients pushed and the step reported,
// through one shard_exchange whatever path each shard takes. Plain: pull,
// compute, push. With train.pull-ahead, when step s is computed its job
// starts (step s's pushes, then from each shard, once its push is
// answered, the values of the step after next), the job of step s-1 is
// collected first (its report, the values step s+1 computes on), and step
// s+1 computes while job s moves: on the bulk path on a thread of its own,
// over BASP as replies waiting in the mailbox. Step s+1 thus starts from
// every update but its own worker's step s: one step staler than plain.
// A model with an embedding table (plain only) has its batch's rows ride in
// the step's pull and push: one round trip each way for values and rows.
#include <functional>
#include <string>

#include "actors/exchange/row_exchange.hpp"
#include "actors/exchange/shard_exchange.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/run_end.hpp"
#include "actors/worker/param_buffers.hpp"

namespace troupe {

/// What the pipeline asks of its worker.
struct step_hooks {
  std::function<void()> compute;                  ///< the step's values are in
  std::function<void(const step_report&)> report; ///< a pushed step is answered: count, report
  std::function<void()> nonfinite;                ///< nothing pushed: the chief decides
  std::function<void()> over;                     ///< the step under way is over
  /// A peer was lost or a request failed: the run must recover.
  std::function<void(const std::string& why, const std::string& error)> recover;
  /// What the worker cannot go on from (a pull that does not fit the plan,
  /// data it cannot read: `kind` says which, for its exit code).
  std::function<void(const std::string& why, const failure& error, run_end kind)> fail;
};

class step_pipeline {
public:
  /// `exchange` and `buffers` must outlive the pipeline.
  step_pipeline(shard_exchange& exchange, param_buffers& buffers, std::string label,
                bool pull_ahead, step_hooks hooks);

  /// A new plan: whatever was under way is void. `router` must outlive its use.
  void reset(const slice_router& router);
  /// One embedding table's rows a step carries: each step pulls the rows
  /// of batch->keys (into batch->values) with its values and pushes
  /// batch->grads with its gradients (to every shard: each counts every
  /// step). Both must outlive their use; the keys must be in before begin().
  struct carried_rows {
    row_exchange* exchange;
    batch_rows* batch;
  };
  /// From now on each step carries these tables' rows (none: a dense model).
  void carry_rows(std::vector<carried_rows> tables);
  /// A granted step of `run` begins: its values pulled (unless pulled
  /// ahead), then computed.
  void begin(uint64_t run);
  /// About to compute: with pull-ahead, a stretch's first step starts the
  /// next step's pulls.
  void before_compute(uint64_t run);
  /// The step is computed (`pushable`: its gradients are finite): pushed,
  /// answered, reported, over.
  void computed(const push_header& step, const step_report& report, bool pushable);
  /// A pull-ahead job is under way (or done and not yet collected).
  bool flushable() const noexcept { return job_.active; }
  /// No step is granted: the pull-ahead job is collected (its step
  /// reported, its values let go: they would be stale by the next grant),
  /// then over.
  void flush();
  /// What is under way is void (a lost peer, a new plan).
  void drop();

private:
  void pull_now(uint64_t run);
  void push_now(const push_header& step, const step_report& report);
  void start_job(const push_header& step, const step_report& report, bool with_pushes);
  void collect(std::function<void()> then);
  std::vector<exchange_part> parts(bool with_gradients);
  /// `header` with the worker's wire precision and push form.
  push_header stamped(push_header header) const;
  /// A push's outcome into `report`; false once recovery started.
  bool settle_push(int32_t shard, const part_outcome& outcome, step_report& report);
  bool settle_pull(const slice_router::shard_part& part, part_outcome& outcome, bool ahead);

  shard_exchange& exchange_;
  param_buffers& buffers_;
  const slice_router* router_ = nullptr;
  std::string label_;
  bool pull_ahead_;
  step_hooks hooks_;
  struct job {
    bool active = false;
    bool pushes = false; // false: pulls only (a stretch's first step)
    step_report report;  // of the pushed step, sent once it is answered
  } job_;
  bool values_ready_ = false; // the parameters hold the next step's values
  std::vector<carried_rows> rows_;
};

} // namespace troupe
