#include "tensor/nn/metric.hpp"

#include <numeric>

namespace troupe {

double binary_scores::auc() const {
  std::vector<uint32_t> order(logits_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return logits_[a] < logits_[b]; });
  // Sum of the positives' ranks (1-based, ties at their mean rank).
  double positive_rank_sum = 0;
  uint64_t positives = 0;
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() && logits_[order[last + 1]] == logits_[order[first]])
      ++last;
    double mean_rank = (first + last) / 2.0 + 1;
    for (size_t i = first; i <= last; ++i)
      if (positives_[order[i]]) {
        positive_rank_sum += mean_rank;
        ++positives;
      }
    first = last + 1;
  }
  uint64_t negatives = order.size() - positives;
  if (positives == 0 || negatives == 0)
    return 0.5;
  double u = positive_rank_sum - positives * (positives + 1) / 2.0;
  return u / (static_cast<double>(positives) * static_cast<double>(negatives));
}

double binary_scores::logloss() const {
  if (logits_.empty())
    return 0;
  double total = 0;
  for (size_t i = 0; i < logits_.size(); ++i) {
    double p = std::clamp(1.0 / (1.0 + std::exp(-double{logits_[i]})), 1e-7, 1 - 1e-7);
    total -= positives_[i] ? std::log(p) : std::log(1 - p);
  }
  return total / static_cast<double>(logits_.size());
}

} // namespace troupe
