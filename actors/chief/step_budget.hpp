#pragma once
// The chief's count of global steps, without CAF. Steps are granted to
// workers before they compute and completed when their update is applied;
// at most last_step steps are ever granted, so exactly last_step updates
// happen (TF's StopAtStepHook overshoots by up to the number of workers).
// A worker may hold up to `lease` steps at once (async mode leases two, so
// that a worker computes its next step while its report of the last one is
// on the way); a lost worker's or refused update's step is revoked and
// granted again, before any new one.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace troupe {

class step_budget {
public:
  /// first_step: steps already trained (a restored checkpoint's).
  explicit step_budget(int64_t last_step, int64_t first_step = 0, int32_t lease = 1);

  /// A new step for `worker`, or nullopt when every step is granted. A
  /// worker that holds `lease` steps already is given its lowest one again
  /// (a repeated ask gets the same answer).
  std::optional<int64_t> grant(int32_t worker);

  /// The update of `step`, granted to `worker`, was applied: global_step advances.
  void complete(int32_t worker, int64_t step);

  /// `step` of `worker` is void (a refused update): it goes back.
  void revoke(int32_t worker, int64_t step);
  /// Every step `worker` holds goes back (a lost worker).
  void revoke_all(int32_t worker);

  bool has_grant(int32_t worker, int64_t step) const;
  /// Steps `worker` holds.
  size_t held(int32_t worker) const;
  /// The steps `worker` holds, lowest first.
  std::vector<int64_t> steps_of(int32_t worker) const;
  /// The workers holding at least one step.
  std::vector<int32_t> holding() const;
  int64_t global_step() const noexcept { return completed_; }
  int64_t last_step() const noexcept { return last_step_; }
  int32_t lease() const noexcept { return lease_; }
  bool finished() const noexcept { return completed_ >= last_step_; }
  size_t outstanding() const noexcept { return outstanding_.size(); }
  /// Steps not granted to anyone now (new ones and revoked ones).
  int64_t ungranted() const noexcept {
    return last_step_ - next_ + static_cast<int64_t>(returned_.size());
  }
  /// Workers that hold at least one step.
  size_t holders() const noexcept { return held_by_.size(); }

private:
  // Forgets a grant (completed or revoked) and counts it off its worker.
  void release(std::map<int64_t, int32_t>::iterator grant);

  int64_t last_step_;
  int32_t lease_;
  int64_t completed_ = 0;
  int64_t next_ = 0;
  std::map<int64_t, int32_t> outstanding_; // granted step -> its worker
  std::map<int32_t, size_t> held_by_;      // worker -> steps it holds (a worker's asks look here)
  std::set<int64_t> returned_;             // revoked steps, granted again first
};

} // namespace troupe
