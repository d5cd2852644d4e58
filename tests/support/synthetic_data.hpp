#pragma once
// Small synthetic data for actor tests: 40 examples of 784 features whose
// label is the argmax of a fixed linear map, so softmax regression learns it.
#include <cmath>
#include <memory>
#include <random>

#include "actors/cluster.hpp"

namespace troupe::testing {

/// Train and test sets; with poison every pixel is NaN (non-finite gradients).
inline training_data synthetic_data(bool poison = false) {
  auto make = [&](uint32_t seed) {
    dataset d;
    d.images = tensor({40, 784});
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (size_t i = 0; i < d.images.size(); ++i)
      d.images[i] = u(rng);
    for (int r = 0; r < 40; ++r) {
      int best = 0;
      for (int c = 1; c < 10; ++c)
        if (d.images[r * 784 + c * 7] > d.images[r * 784 + best * 7])
          best = c;
      d.labels.push_back(best);
    }
    if (poison)
      d.images.fill(std::nanf(""));
    return std::make_shared<const dataset>(std::move(d));
  };
  return {make(1), make(2)};
}

} // namespace troupe::testing
