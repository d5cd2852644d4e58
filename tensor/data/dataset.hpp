#pragma once
// Examples in memory (a whole set, or a batch of one). Files and their
// formats are formats.hpp's and catalog.hpp's; a worker's stream of
// batches is stream.hpp's.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// What a model learns (data.task): classes (softmax cross-entropy,
/// accuracy) or a real target (mean squared error; its root is reported).
enum class objective { classification, regression };

TROUPE_ENUM_NAMES(objective, {objective::classification, "classification"},
                  {objective::regression, "regression"});

/// Examples as rows of floats and their class labels.
struct dataset {
  tensor images;               // [examples, features]
  std::vector<int32_t> labels; // [examples] (all 0 for regression)
  std::vector<float> targets;  // regression: [examples]; empty for classes
  size_t size() const noexcept { return labels.size(); }
  int64_t features() const { return images.dim(1); }
};

/// A minibatch copied out of a dataset.
struct batch {
  tensor images;
  std::vector<int32_t> labels;
  std::vector<float> targets; // regression
  size_t size() const noexcept { return labels.size(); }
};

/// Checks a set in memory before anyone trains on it: at least one example,
/// a label per image, every label in [0, classes), every feature finite.
/// Throws data_error naming `what`, the example and the problem.
void check_dataset(const dataset& data, int64_t classes, const std::string& what);

/// Copies rows [first, first + count) of `data` into `out` (evaluation).
void copy_batch(const dataset& data, size_t first, size_t count, batch& out);

} // namespace troupe
