#pragma once
// Internal to the chief: how global steps advance, one implementation per
// update mode. Async (async_steps.cpp): the chief grants every step itself
// (grant_desk) and counts each worker's report. Sync (sync_steps.cpp): a
// token queue runs the updates and reports each one; replica_policy decides
// what a lost worker changes. The rest of the chief calls this interface
// and never asks which mode runs.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/chief/chief.hpp"

namespace troupe::chief_run {

using self_ptr = chief_impl::stateful_pointer<chief_state>;

class step_coordination {
public:
  using clock = std::chrono::steady_clock;
  virtual ~step_coordination() = default;

  virtual int64_t global_step() const = 0;
  /// The steps a worker may hold at once (its plan's lease).
  virtual int32_t lease() const = 0;
  /// Updates not applied (async: non-finite or refused pushes; sync: none).
  virtual int64_t refused() const = 0;
  /// Gradients a sync step did not wait for (backup workers; async: none).
  virtual uint64_t dropped() const = 0;
  /// Leases taken back from workers that held steps too long (async).
  virtual uint64_t expired_leases() const = 0;

  /// The shards are being initialised: whom the workers report to, and the
  /// shards' update options (sync: the token queue, spawned now).
  virtual step_coordinator_actor begin(self_ptr self, shard_options& options) = 0;
  /// Every shard is initialised: training starts.
  virtual void shards_ready(self_ptr self) = 0;

  /// A worker's report of a step (async), or of a non-finite gradient.
  virtual caf::result<step_grant> on_report(self_ptr self, const step_report& r) = 0;
  virtual caf::result<step_grant> on_nonfinite(self_ptr self, step_report r) = 0;
  /// A worker without data for step r.step (data.follow) gives it back.
  virtual void on_idle(self_ptr, const step_report&) {}
  /// Several reports of one worker at once (async, train.report-every > 1).
  virtual caf::result<std::vector<step_grant>> on_reports(self_ptr self,
                                                          const std::vector<step_report>& rs) = 0;
  /// The token queue completed an update (sync).
  virtual void on_step_done(self_ptr self, const step_summary& s) = 0;

  /// Worker `index` was admitted, or went down (`lost`: while the run
  /// trained, lost, failed or left; not at its end).
  virtual void admitted(self_ptr self, int32_t index, const worker_actor& worker) = 0;
  virtual void worker_down(self_ptr self, int32_t index, bool lost) = 0;
  /// Why the run cannot go on for want of workers, once that has lasted
  /// longer than `limit`; empty while it can.
  virtual std::optional<std::string> short_of_workers(std::chrono::milliseconds limit,
                                                      clock::time_point now) const = 0;

  /// Every second while training: steps held without a report for
  /// cluster.step-lease-timeout go to the other workers (async; sync
  /// waits for its tokens, or for backups).
  virtual void expire_leases(self_ptr self) = 0;

  /// A checkpoint's fence (async: no new grants until every granted step
  /// is in; sync saves need none, the shards copy at a later update).
  virtual bool saves_need_fence() const = 0;
  virtual void hold() = 0;
  virtual bool quiescent() const = 0;
  virtual void resume() = 0;

  /// A shard was lost: no step advances until restart_at.
  virtual void pause(self_ptr self) = 0;
  /// After the restore: steps continue from `step` (the run's new identity
  /// and key are in the state already).
  virtual void restart_at(self_ptr self, int64_t step) = 0;

  /// last_step reached: every waiting worker is told to stop.
  virtual void finishing() = 0;
  /// The stop of every task (`failed`: the run ended in an error).
  virtual void stop(self_ptr self, bool failed) = 0;
  /// The chief quits.
  virtual void quit(self_ptr self) = 0;

  /// The mode's part of a progress line and of its TensorBoard scalars.
  virtual std::string progress_text(const progress_line& line) const = 0;
  virtual void progress_scalars(const progress_line& line,
                                std::vector<std::pair<std::string, float>>& out) const = 0;
};

std::shared_ptr<step_coordination> make_async_steps(self_ptr self);
std::shared_ptr<step_coordination> make_sync_steps(self_ptr self);

} // namespace troupe::chief_run
