#include "actors/ps/sync_accumulator.hpp"

#include "tensor/core/ops.hpp"

namespace troupe {

sync_accumulator::sync_accumulator(std::vector<std::string> names, int32_t required,
                                   int64_t first_step)
  : names_(std::move(names)), required_(required), step_(first_step) {
}

sync_verdict sync_accumulator::add(int32_t worker, int64_t step,
                                   const std::vector<tensor>& gradients) {
  if (step < step_) {
    ++dropped_;
    return sync_verdict::stale;
  }
  if (step > step_)
    return sync_verdict::ahead;
  if (!contributors_.insert(worker).second)
    return sync_verdict::duplicate; // its first gradient of this step counts
  if (count_ == 0) {
    first_ = std::chrono::steady_clock::now();
    sums_ = gradients; // the first gradient starts the sums
  } else {
    for (size_t i = 0; i < gradients.size(); ++i)
      ops::axpy(1.0f, gradients[i], sums_[i]);
  }
  ++count_;
  return sync_verdict::accepted;
}

std::vector<tensor> sync_accumulator::take_average() {
  last_straggler_ms_ =
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_).count();
  auto scale = 1.0f / static_cast<float>(count_);
  for (auto& t : sums_)
    ops::scale(t, scale);
  auto out = std::move(sums_);
  sums_.clear();
  contributors_.clear();
  count_ = 0;
  ++step_;
  return out;
}

} // namespace troupe
