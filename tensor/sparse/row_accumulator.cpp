#include "tensor/sparse/row_accumulator.hpp"

namespace troupe {

void row_accumulator::add(const int64_t* keys, const uint32_t* counts, const float* grads,
                          size_t n) {
  for (size_t i = 0; i < n; ++i, grads += dim_) {
    uint64_t h = index_.hash(keys[i]);
    uint32_t row = index_.find(keys[i], h);
    if (row == row_map::no_row) {
      row = static_cast<uint32_t>(sums_.keys.size());
      index_.insert(keys[i], h, row);
      sums_.keys.push_back(keys[i]);
      sums_.counts.push_back(0);
      sums_.grads.resize(sums_.grads.size() + dim_, 0.0f);
      pushes_.push_back(0);
    }
    sums_.counts[row] += counts[i];
    ++pushes_[row];
    float* sum = sums_.grads.data() + size_t{row} * dim_;
    for (uint32_t j = 0; j < dim_; ++j)
      sum[j] += grads[j];
  }
}

row_gradients row_accumulator::take(sync_reduction how, uint32_t replicas) {
  for (size_t row = 0; row < sums_.keys.size(); ++row) {
    float scale = 1.0f
                  / static_cast<float>(how == sync_reduction::per_row ? pushes_[row] : replicas);
    float* sum = sums_.grads.data() + row * dim_;
    for (uint32_t j = 0; j < dim_; ++j)
      sum[j] *= scale;
  }
  row_gradients out = std::move(sums_);
  sums_ = {};
  pushes_.clear();
  index_ = row_map();
  return out;
}

} // namespace troupe
