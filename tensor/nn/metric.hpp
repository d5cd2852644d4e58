#pragma once
// The figure a run reports for its task, written once: RMSE for regression,
// accuracy for classification (the rule was spelt out in eight places, one
// of them without the guard below).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/data/dataset.hpp"

namespace troupe {

/// The root of a mean squared error; a mean that rounding left just below
/// zero reads as 0, never as NaN.
inline double rmse_of(double mean_squared_error) {
  return std::sqrt(std::max(0.0, mean_squared_error));
}

/// "rmse" and its value, or "accuracy" (correct / examples; 0 without examples).
struct task_metric {
  const char* name;
  double value;
};

inline task_metric metric_of(objective task, double mean_loss, uint64_t correct,
                             uint64_t examples) {
  if (task == objective::regression)
    return {"rmse", rmse_of(mean_loss)};
  return {"accuracy",
          examples ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0};
}

} // namespace troupe
