#pragma once
// The training loss of the models: softmax cross-entropy against integer
// labels. Its per-row arithmetic is shared with the GPU (shared_math.hpp).
#include <cstdint>
#include <vector>

#include "tensor/core/tensor.hpp"

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

} // namespace troupe
