#pragma once
// A loaded model's scores over labelled examples, summed batch by batch:
// what troupe-eval prints and the evaluator task logs. A model over an
// embedding table is scored as the chief's evaluations score it (each
// example's logit: its loss, whether it is right, and for binary
// classification the AUC and log loss); any other through model::evaluate.
#include <cstdint>

#include "tensor/export/model_export.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe {

class model_scorer {
public:
  /// `model` must outlive the scorer.
  explicit model_scorer(exported_model& model) : model_(model) {}

  /// Scores the examples of `b` (labels, or targets for regression).
  void add(const batch& b);

  uint64_t examples() const { return examples_; }
  uint64_t correct() const { return correct_; }
  /// The mean loss (squared error for regression); 0 without examples.
  double loss() const;
  /// Whether auc() and logloss() mean anything: a binary classifier over
  /// an embedding table.
  bool binary() const;
  double auc() const { return scores_.auc(); }
  double logloss() const { return scores_.logloss(); }

private:
  exported_model& model_;
  tensor outputs_;
  double loss_sum_ = 0;
  uint64_t correct_ = 0;
  uint64_t examples_ = 0;
  binary_scores scores_;
};

} // namespace troupe
