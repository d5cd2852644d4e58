#pragma once
// Sync mode's sums of one step's dense gradients on a shard, without CAF:
// TF's ConditionalAccumulator for every variable of the shard at once. Which
// pushes count (the step, R, stale and repeated ones) is update_rule's;
// this adds what it takes and hands out the mean. Plain tensors in,
// averaged tensors out.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/tensor.hpp"

namespace troupe {

class sync_accumulator {
public:
  /// names: every variable the shard holds, in the order pushes carry them.
  explicit sync_accumulator(std::vector<std::string> names) : names_(std::move(names)) {}

  /// Adds one worker's gradients (checked already: same names, shapes, finite).
  void add(const std::vector<tensor>& gradients);

  /// The mean of the gradients added, which start again from none.
  std::vector<tensor> take_average();

  int32_t count() const noexcept { return count_; }
  const std::vector<std::string>& names() const noexcept { return names_; }

private:
  std::vector<std::string> names_;
  int32_t count_ = 0;
  std::vector<tensor> sums_;
};

} // namespace troupe
