#pragma once
// Sync mode's sum of one table's row gradients for one step, TF's
// SparseConditionalAccumulator: each worker's push adds its rows; a row
// keeps the sum of its gradients, of its occurrences and of the pushes that
// touched it. At the step's end the rows are averaged per row (TF's
// "average element-wise": a row one of R workers touched gets that worker's
// whole gradient) or divided by R (the variant TF left commented out). Which
// pushes belong to the step (stale, duplicate, ahead) is the shard's
// sync_accumulator's rule, not this class's.
#include <cstdint>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/sparse/row_map.hpp"

namespace troupe {

/// How a synchronous step averages a row (embedding.sync-reduction).
enum class sync_reduction { per_row, replicas };

TROUPE_ENUM_NAMES(sync_reduction, {sync_reduction::per_row, "per_row"},
                  {sync_reduction::replicas, "replicas"});

/// One step's rows, as a push carries them: distinct keys, occurrences per
/// key, gradients keys x dim.
struct row_gradients {
  std::vector<int64_t> keys;
  std::vector<uint32_t> counts;
  std::vector<float> grads;
};

class row_accumulator {
public:
  explicit row_accumulator(uint32_t dim) : dim_(dim) {}

  /// Adds one push: `n` distinct keys (the table checked them), their
  /// occurrences and gradients[n * dim].
  void add(const int64_t* keys, const uint32_t* counts, const float* grads, size_t n);

  /// The step's rows reduced by `how` (`replicas`: R, the pushes a step
  /// takes); empties the accumulator for the next step.
  row_gradients take(sync_reduction how, uint32_t replicas);

  size_t rows() const { return sums_.keys.size(); }

private:
  uint32_t dim_;
  row_map index_;
  row_gradients sums_;
  std::vector<uint32_t> pushes_; ///< per row: the pushes that touched it
};

} // namespace troupe
