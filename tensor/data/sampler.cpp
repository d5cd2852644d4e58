#include "tensor/data/sampler.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "tensor/core/error.hpp"

namespace troupe {

example_sampler::example_sampler(size_t examples, size_t index, size_t count, uint64_t seed,
                                 bool shuffle)
  : seed_(seed), index_(index), shuffle_(shuffle) {
  if (count == 0 || index >= count)
    throw troupe_error("example_sampler: worker index " + std::to_string(index)
                       + " out of range for " + std::to_string(count) + " workers");
  for (size_t i = index; i < examples; i += count)
    order_.push_back(i);
  if (order_.empty())
    throw data_error("worker " + std::to_string(index) + " of " + std::to_string(count)
                     + " gets no examples from a dataset of " + std::to_string(examples));
  reshuffle();
}

void example_sampler::seek(size_t epoch, size_t position) {
  if (position > order_.size())
    throw data_error("worker " + std::to_string(index_) + ": data position "
                     + std::to_string(position) + " lies beyond its share of "
                     + std::to_string(order_.size()) + " examples (another data set?)");
  // Each epoch shuffles the previous one's order: replay them.
  std::sort(order_.begin(), order_.end());
  for (epoch_ = 0;; ++epoch_) {
    reshuffle();
    if (epoch_ == epoch)
      break;
  }
  position_ = position;
}

void example_sampler::reshuffle() {
  position_ = 0;
  if (!shuffle_)
    return;
  std::mt19937_64 rng(seed_ * 1000003u + index_ * 7919u + epoch_);
  std::shuffle(order_.begin(), order_.end(), rng);
}

void example_sampler::next_batch(const dataset& data, size_t batch_size, batch& out) {
  auto features = data.features();
  out.images.resize({static_cast<int64_t>(batch_size), features});
  out.labels.resize(batch_size);
  for (size_t i = 0; i < batch_size; ++i) {
    if (position_ == order_.size()) {
      ++epoch_;
      reshuffle();
    }
    auto example = order_[position_++];
    std::memcpy(out.images.data() + i * features, data.images.data() + example * features,
                features * sizeof(float));
    out.labels[i] = data.labels[example];
  }
}

} // namespace troupe
