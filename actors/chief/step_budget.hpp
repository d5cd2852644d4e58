#pragma once
// The chief's count of global steps, without CAF. Steps are granted to
// workers before they compute and completed when their update is applied;
// at most last_step steps are ever granted, so exactly last_step updates
// happen (TF's StopAtStepHook overshoots by up to the number of workers).
// A lost worker's or refused update's grant is revoked and granted again.
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace troupe {

class step_budget {
public:
  /// first_step: steps already trained (a restored checkpoint's).
  explicit step_budget(int64_t last_step, int64_t first_step = 0);

  /// The next global step for `worker`, or nullopt when every step is granted.
  /// A worker holds at most one grant; asking again returns the same one.
  std::optional<int64_t> grant(int32_t worker);

  /// The worker's update was applied: global_step advances.
  void complete(int32_t worker);

  /// The worker's grant is void (lost worker, refused update): it goes back.
  void revoke(int32_t worker);

  bool has_grant(int32_t worker) const { return outstanding_.count(worker) > 0; }
  int64_t global_step() const noexcept { return completed_; }
  int64_t last_step() const noexcept { return last_step_; }
  bool finished() const noexcept { return completed_ >= last_step_; }
  size_t outstanding() const noexcept { return outstanding_.size(); }

private:
  int64_t last_step_;
  int64_t completed_ = 0;
  int64_t next_ = 0;
  std::map<int32_t, int64_t> outstanding_; // worker -> granted step
  std::set<int64_t> returned_;             // revoked steps, granted again first
};

} // namespace troupe
