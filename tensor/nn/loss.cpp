#include "tensor/nn/loss.hpp"

#include <string>

#include "tensor/core/error.hpp"
#include "tensor/nn/shared_math.hpp"

namespace troupe {

loss_result softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                                  tensor* grad_logits) {
  if (logits.rank() != 2)
    throw shape_error("softmax_cross_entropy: expected 2-D logits, got shape "
                      + to_string(logits.shape()));
  auto rows = logits.dim(0), classes = logits.dim(1);
  if (static_cast<int64_t>(labels.size()) != rows)
    throw shape_error("softmax_cross_entropy: " + std::to_string(labels.size()) + " labels for "
                      + std::to_string(rows) + " rows");
  for (auto label : labels)
    if (label < 0 || label >= classes)
      throw shape_error("softmax_cross_entropy: label " + std::to_string(label) + " outside [0, "
                        + std::to_string(classes) + ")");
  if (grad_logits)
    grad_logits->resize(logits.shape());
  loss_result out;
  double total = 0;
  float inv_rows = rows > 0 ? 1.0f / static_cast<float>(rows) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    bool correct = false;
    total += shared::softmax_xent_row<double>(
      logits.data() + r * classes, classes, labels[static_cast<size_t>(r)], inv_rows,
      grad_logits ? grad_logits->data() + r * classes : nullptr, &correct);
    out.correct += correct;
  }
  out.loss = rows > 0 ? total / static_cast<double>(rows) : 0.0;
  return out;
}

loss_result mean_squared_error(const tensor& outputs, const std::vector<float>& targets,
                               tensor* grad_outputs) {
  if (outputs.rank() != 2 || outputs.dim(1) != 1)
    throw shape_error("mean_squared_error: expected outputs of shape [batch, 1], got "
                      + to_string(outputs.shape()));
  auto rows = outputs.dim(0);
  if (static_cast<int64_t>(targets.size()) != rows)
    throw shape_error("mean_squared_error: " + std::to_string(targets.size()) + " targets for "
                      + std::to_string(rows) + " rows");
  if (grad_outputs)
    grad_outputs->resize(outputs.shape());
  double total = 0;
  float scale = rows > 0 ? 2.0f / static_cast<float>(rows) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    float diff = outputs[static_cast<size_t>(r)] - targets[static_cast<size_t>(r)];
    total += double{diff} * diff;
    if (grad_outputs)
      (*grad_outputs)[static_cast<size_t>(r)] = scale * diff;
  }
  loss_result out;
  out.loss = rows > 0 ? total / static_cast<double>(rows) : 0.0;
  return out;
}

} // namespace troupe
