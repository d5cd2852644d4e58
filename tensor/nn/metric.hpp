#pragma once
// The figure a run reports for its task, written once: RMSE for regression,
// accuracy for classification (the rule was spelt out in eight places, one
// of them without the guard below).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

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

namespace troupe {

/// Binary classification's figures (issue 28's CTR models): the area under
/// the ROC curve, exact (ties count one half, as the Mann-Whitney U
/// statistic), and the mean log loss. Examples are added batch by batch as
/// logits, 5 bytes an example. The chief's evaluator and troupe-eval both
/// score through this class, so the same logits give the same figures to the
/// last digit: a probability rounded to float on one side and not on the
/// other moved the log loss of saturated logits in the sixth digit.
class binary_scores {
public:
  /// One example: the logit of class 1 and the label.
  void add_logit(float logit, bool positive) {
    logits_.push_back(logit);
    positives_.push_back(positive);
  }
  size_t size() const { return logits_.size(); }
  /// The area under the ROC curve; 0.5 when one class is missing. Ranked by
  /// logit, which the sigmoid keeps in order without rounding ties together.
  double auc() const;
  /// -mean(y log p + (1 - y) log(1 - p)), p = sigmoid(logit) in double,
  /// clipped to [1e-7, 1 - 1e-7] as Keras does; 0 without examples.
  double logloss() const;
  /// The unclipped loss of one logit, softplus(-logit) or softplus(logit), in
  /// double: what training minimises and the runs report as test_loss.
  static double example_loss(float logit, bool positive) {
    double y = logit;
    return std::max(y, 0.0) - (positive ? y : 0.0) + std::log1p(std::exp(-std::fabs(y)));
  }

private:
  std::vector<float> logits_;
  std::vector<bool> positives_;
};

} // namespace troupe
