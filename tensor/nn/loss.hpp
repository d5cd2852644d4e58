#pragma once
// The training losses of the models: softmax cross-entropy against integer
// labels (classification; its per-row arithmetic is shared with the GPU,
// shared_math.hpp), and mean squared error against real targets
// (regression, CPU workers).
#include <cstdint>
#include <vector>

#include "tensor/core/tensor.hpp"
#include "tensor/data/dataset.hpp"

namespace troupe {

struct loss_result {
  double loss = 0;    ///< mean over the rows
  size_t correct = 0; ///< rows whose (first) largest logit is the label's
};

/// Mean softmax cross-entropy of logits [batch, classes] against labels,
/// computed stably; with grad_logits, also d(mean loss)/d(logits) into it
/// (resized). Throws shape_error on a label out of range or a count that
/// does not fit.
loss_result softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                                  tensor* grad_logits = nullptr);

/// TF's mean_squared_error of outputs [batch, 1] against targets: the mean
/// of (output - target)^2; with grad_outputs, d(mean)/d(outputs) into it
/// (resized). Throws shape_error on a count that does not fit.
loss_result mean_squared_error(const tensor& outputs, const std::vector<float>& targets,
                               tensor* grad_outputs = nullptr);

} // namespace troupe
