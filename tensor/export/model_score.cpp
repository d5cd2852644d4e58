#include "tensor/export/model_score.hpp"

namespace troupe {

void model_scorer::add(const batch& b) {
  auto n = b.size();
  if (!model_.table) {
    auto stats = model_.net->evaluate(model_.params, b);
    loss_sum_ += stats.loss * static_cast<double>(n);
    correct_ += stats.correct;
    examples_ += n;
    return;
  }
  predict_batch(model_, b, outputs_);
  for (size_t e = 0; e < n; ++e) {
    if (model_.card.task == objective::regression) {
      double d = double{outputs_.data()[e]} - b.targets[e];
      loss_sum_ += d * d;
      continue;
    }
    float y = outputs_.data()[2 * e + 1]; // the logits are (0, y)
    bool positive = b.labels[e] == 1;
    loss_sum_ += binary_scores::example_loss(y, positive);
    correct_ += (y > 0) == positive;
    scores_.add_logit(y, positive);
  }
  examples_ += n;
}

double model_scorer::loss() const {
  return examples_ > 0 ? loss_sum_ / static_cast<double>(examples_) : 0.0;
}

bool model_scorer::binary() const {
  return model_.table && model_.card.task == objective::classification;
}

} // namespace troupe
