#include "tensor/sparse/lookup_batch.hpp"

#include <algorithm>
#include <cmath>

#include "tensor/sparse/keys.hpp"

namespace troupe {

void unique_keys::assign(const int64_t* ids, size_t n) {
  keys_.clear();
  counts_.clear();
  inverse_.resize(n);
  size_t capacity = 16;
  while (capacity < 2 * n)
    capacity *= 2;
  slots_.assign(capacity, 0);
  size_t mask = capacity - 1;
  for (size_t i = 0; i < n; ++i) {
    size_t s = mix64(static_cast<uint64_t>(ids[i])) & mask;
    while (slots_[s] != 0 && keys_[slots_[s] - 1] != ids[i])
      s = (s + 1) & mask;
    if (slots_[s] == 0) {
      keys_.push_back(ids[i]);
      counts_.push_back(0);
      slots_[s] = static_cast<uint32_t>(keys_.size());
    }
    uint32_t k = slots_[s] - 1;
    ++counts_[k];
    inverse_[i] = k;
  }
}

namespace {

// The factor a bag's weighted sum is divided by.
float bag_divisor(combiner how, const bag_layout& bags, size_t b) {
  if (how == combiner::sum)
    return 1.0f;
  double total = 0;
  for (uint32_t i = bags.offsets[b]; i < bags.offsets[b + 1]; ++i) {
    double w = bags.weights.empty() ? 1.0 : bags.weights[i];
    total += how == combiner::mean ? w : w * w;
  }
  if (total <= 0)
    return 1.0f;
  return static_cast<float>(how == combiner::mean ? total : std::sqrt(total));
}

} // namespace

void combine_rows(combiner how, const bag_layout& bags, const std::vector<uint32_t>& inverse,
                  const float* rows, uint32_t dim, float* combined, combined_layout where) {
  for (size_t b = 0; b < bags.bags(); ++b) {
    float* out = combined + where.offset(b, dim);
    std::fill_n(out, dim, 0.0f);
    float divisor = bag_divisor(how, bags, b);
    for (uint32_t i = bags.offsets[b]; i < bags.offsets[b + 1]; ++i) {
      float w = (bags.weights.empty() ? 1.0f : bags.weights[i]) / divisor;
      const float* row = rows + size_t{inverse[i]} * dim;
      for (uint32_t j = 0; j < dim; ++j)
        out[j] += w * row[j];
    }
  }
}

void combine_rows_backward(combiner how, const bag_layout& bags,
                           const std::vector<uint32_t>& inverse, const float* out_grad,
                           uint32_t dim, size_t distinct, float* row_grads, combined_layout where) {
  std::fill_n(row_grads, distinct * dim, 0.0f);
  for (size_t b = 0; b < bags.bags(); ++b) {
    const float* grad_of_bag = out_grad + where.offset(b, dim);
    float divisor = bag_divisor(how, bags, b);
    for (uint32_t i = bags.offsets[b]; i < bags.offsets[b + 1]; ++i) {
      float w = (bags.weights.empty() ? 1.0f : bags.weights[i]) / divisor;
      float* grad = row_grads + size_t{inverse[i]} * dim;
      for (uint32_t j = 0; j < dim; ++j)
        grad[j] += w * grad_of_bag[j];
    }
  }
}

void clip_rows(float* rows, size_t n, uint32_t dim, float max_norm, std::vector<float>& scales) {
  scales.assign(n, 1.0f);
  for (size_t k = 0; k < n; ++k) {
    float* row = rows + k * dim;
    double norm = 0;
    for (uint32_t j = 0; j < dim; ++j)
      norm += double{row[j]} * row[j];
    norm = std::sqrt(norm);
    if (norm <= max_norm)
      continue;
    scales[k] = static_cast<float>(max_norm / norm);
    for (uint32_t j = 0; j < dim; ++j)
      row[j] *= scales[k];
  }
}

void clip_rows_backward(const float* rows, size_t n, uint32_t dim, const std::vector<float>& scales,
                        float* grads) {
  for (size_t k = 0; k < n; ++k) {
    if (scales[k] == 1.0f)
      continue;
    // rows hold e' = s·e, so |e|² = |e'|²/s² and e (e·g)/|e|² = e' (e'·g)/|e'|².
    const float* clipped = rows + k * dim;
    float* g = grads + k * dim;
    double dot = 0, norm2 = 0;
    for (uint32_t j = 0; j < dim; ++j) {
      dot += double{clipped[j]} * g[j];
      norm2 += double{clipped[j]} * clipped[j];
    }
    for (uint32_t j = 0; j < dim; ++j)
      g[j] = static_cast<float>(scales[k] * (g[j] - clipped[j] * dot / norm2));
  }
}

} // namespace troupe
