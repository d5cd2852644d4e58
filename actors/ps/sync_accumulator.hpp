#pragma once
// The gradient accumulator of one PS shard in sync mode, without CAF: TF's
// ConditionalAccumulator for every variable of the shard at once. Gradients
// for the current step are summed until `required` have been accepted; older
// ones are stale and dropped (and counted), a second one from the same worker
// for the same step is dropped too. Plain tensors in, averaged tensors out.
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "actors/ps/sync_verdict.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

class sync_accumulator {
public:
  /// names: every variable the shard holds, in the order pushes carry them.
  /// first_step: the step training starts at (a restored checkpoint's).
  sync_accumulator(std::vector<std::string> names, int32_t required, int64_t first_step = 0);

  /// Adds one worker's gradients for `step` (already validated: same names,
  /// shapes, finite). Only gradients of the current step are accepted.
  sync_verdict add(int32_t worker, int64_t step, const std::vector<tensor>& gradients);

  /// True once `required` gradients of the current step are in.
  bool ready() const noexcept { return count_ >= required_ && count_ > 0; }

  /// The mean of the accepted gradients; moves the accumulator to the next
  /// step. Call only when ready().
  std::vector<tensor> take_average();

  /// Changes R (shrink on worker loss, grow on rejoin); takes effect at once.
  void set_required(int32_t required) noexcept { required_ = required; }

  int64_t step() const noexcept { return step_; }
  int32_t count() const noexcept { return count_; }
  int32_t required() const noexcept { return required_; }
  uint64_t dropped() const noexcept { return dropped_; }
  const std::vector<std::string>& names() const noexcept { return names_; }
  /// Time from the first to the last accepted gradient of the step just taken.
  double last_straggler_ms() const noexcept { return last_straggler_ms_; }

private:
  std::vector<std::string> names_;
  int32_t required_;
  int64_t step_ = 0;
  int32_t count_ = 0;
  uint64_t dropped_ = 0;
  std::set<int32_t> contributors_;
  std::vector<tensor> sums_;
  std::chrono::steady_clock::time_point first_;
  double last_straggler_ms_ = 0;
};

} // namespace troupe
