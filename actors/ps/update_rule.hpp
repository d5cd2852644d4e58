#pragma once
// What a shard makes of one worker's push of one step, its dense gradients
// and its embedding rows together: one rule per shard, without CAF.
// Async: each granted step applies once (a step granted again after its
// worker was lost or held it too long, or a replay, is not applied twice).
// Sync: the current step's pushes are counted until R distinct workers'
// are in; an older step is stale, a later one ahead, one at or past
// last_step refused, a second push of one worker ignored. Either way a
// grant the chief took back is refused. The sums themselves are the
// stores' (sync_accumulator, table_store); this class decides.
#include <chrono>
#include <cstdint>
#include <set>
#include <utility>

#include "actors/ps/applied_steps.hpp"

namespace troupe {

enum class push_verdict {
  take,     ///< async: apply it now; sync: count it towards the current step
  repeated, ///< applied already (async), or this worker's push of the step is in (sync)
  stale,    ///< sync: for a step already applied: dropped
  ahead,    ///< sync: for a step the shard has not reached: refused
  past_end, ///< sync: for last_step or later: refused
  revoked,  ///< its grant was taken back (held too long): refused
};

class update_rule {
public:
  /// Async, continuing from `first_step` (every step below counts as applied).
  static update_rule async(int64_t first_step = 0) {
    update_rule r;
    r.applied_ = applied_steps(first_step);
    r.step_ = first_step;
    return r;
  }
  /// Sync: R = `required` workers a step, from `first_step` up to `last_step`.
  static update_rule sync(int32_t required, int64_t first_step, int64_t last_step) {
    update_rule r;
    r.sync_ = true;
    r.required_ = required;
    r.step_ = first_step;
    r.last_step_ = last_step;
    return r;
  }

  bool is_sync() const noexcept { return sync_; }

  /// What becomes of `worker`'s push of `step`.
  push_verdict judge(int32_t worker, int64_t step) const;

  /// A push judged `take` was taken: async, its step is applied; sync, its
  /// worker counts towards the current step.
  void took(int32_t worker, int64_t step);

  /// Sync: R distinct workers' pushes of the current step are in.
  bool ready() const noexcept { return sync_ && count() >= required_ && count() > 0; }
  /// Sync: the current step was applied; on to the next.
  void advance();
  /// Sync: the step whose pushes are counted now.
  int64_t step() const noexcept { return step_; }
  int32_t count() const noexcept { return static_cast<int32_t>(contributors_.size()); }
  int32_t required() const noexcept { return required_; }
  /// Changes R (shrink on worker loss, grow on rejoin); takes effect at once.
  void set_required(int32_t required) noexcept { required_ = required; }

  /// The chief took the grant of `step` back from `worker`: its pushes of
  /// that step are refused (until the step is applied, when repetition
  /// answers them anyway).
  void revoke(int32_t worker, int64_t step);

  /// Sync pushes dropped as stale.
  uint64_t dropped() const noexcept { return dropped_; }
  /// Sync: time from the first to the last push of the step just applied.
  double last_straggler_ms() const noexcept { return last_straggler_ms_; }
  /// A stale push was dropped (counted).
  void drop() noexcept { ++dropped_; }

private:
  update_rule() = default;

  bool sync_ = false;
  applied_steps applied_;
  int64_t step_ = 0;
  int64_t last_step_ = 0;
  int32_t required_ = 1;
  std::set<int32_t> contributors_;
  std::set<std::pair<int32_t, int64_t>> revoked_;
  uint64_t dropped_ = 0;
  std::chrono::steady_clock::time_point first_;
  double last_straggler_ms_ = 0;
};

} // namespace troupe
