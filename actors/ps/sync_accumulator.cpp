#include "actors/ps/sync_accumulator.hpp"

#include "tensor/core/ops.hpp"

namespace troupe {

void sync_accumulator::add(const std::vector<tensor>& gradients) {
  if (count_ == 0) {
    sums_ = gradients; // the first gradient starts the sums
  } else {
    for (size_t i = 0; i < gradients.size(); ++i)
      ops::axpy(1.0f, gradients[i], sums_[i]);
  }
  ++count_;
}

std::vector<tensor> sync_accumulator::take_average() {
  if (count_ > 0) {
    auto scale = 1.0f / static_cast<float>(count_);
    for (auto& t : sums_)
      ops::scale(t, scale);
  }
  auto out = std::move(sums_);
  sums_.clear();
  count_ = 0;
  return out;
}

} // namespace troupe
