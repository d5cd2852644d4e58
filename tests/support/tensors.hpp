#pragma once
// Tensors for tests: random values, shapes with a batch axis, and the one
// comparison the parity and emulation tests state their bounds in.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "tensor/core/tensor.hpp"

namespace troupe::testing {

/// Uniform values in [lo, hi), the same for the same seed.
inline tensor random_tensor(shape_t shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = u(rng);
  return t;
}

/// [batch, per_example...].
inline shape_t with_batch(int64_t batch, const shape_t& per_example) {
  shape_t out{batch};
  out.insert(out.end(), per_example.begin(), per_example.end());
  return out;
}

/// ||a - b|| / ||b|| (b's size values at a), in double: one number per tensor.
inline double relative_error(const float* a, const tensor& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

/// As above; tensors of different shapes are infinitely apart.
inline double relative_error(const tensor& a, const tensor& b) {
  if (a.shape() != b.shape())
    return std::numeric_limits<double>::infinity();
  return relative_error(a.data(), b);
}

} // namespace troupe::testing
