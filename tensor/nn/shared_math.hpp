#pragma once
// The per-element arithmetic the CPU layers (tensor/nn) and the CUDA kernels
// (gpu/cuda) must agree on, written once. The C++ compiler builds it for the
// CPU, nvcc for device code (TROUPE_HD); gpu/cuda/element_math.hpp adds the
// GPU-only index arithmetic on top. No CUDA headers, no Eigen.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TROUPE_HD __host__ __device__
#else
#define TROUPE_HD
#endif

namespace troupe::shared {

// -- dropout masks: SplitMix64 over a counter ---------------------------------
// Counter-based, so a GPU thread computes its own draw and CPU and GPU workers
// draw the same masks. Each 64-bit draw decides two values.

constexpr uint64_t golden_gamma = 0x9e3779b97f4a7c15ull;

TROUPE_HD inline uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A value is kept when its 32-bit half of a draw falls below this.
inline uint64_t dropout_keep_below(float rate) {
  return static_cast<uint64_t>((1.0 - rate) * 4294967296.0);
}

/// Draw `pair` (deciding values 2 pair and 2 pair + 1) of a step whose
/// counter started at `counter`.
TROUPE_HD inline uint64_t dropout_draw(uint64_t counter, uint64_t pair) {
  return splitmix64(counter + (pair + 1) * golden_gamma);
}

/// The mask of the value that half `half` (0 or 1) of `draw` decides:
/// `scale` (1 / (1 - rate)) when kept, 0 when dropped.
TROUPE_HD inline float dropout_mask(uint64_t draw, unsigned half, uint64_t keep_below,
                                    float scale) {
  return ((draw >> (32 * half)) & 0xffffffffu) < keep_below ? scale : 0.0f;
}

/// The counter after a step over n values (one draw per pair).
TROUPE_HD inline uint64_t dropout_advance(uint64_t counter, uint64_t n) {
  return counter + ((n + 1) / 2) * golden_gamma;
}

/// The counter after `steps` training steps over n values each: where a
/// worker restored from a checkpoint continues (dropout_advance `steps`
/// times, modulo 2^64).
TROUPE_HD inline uint64_t dropout_after_steps(uint64_t seed, uint64_t steps, uint64_t n) {
  return seed + steps * ((n + 1) / 2) * golden_gamma;
}

// -- softmax cross-entropy, one row -------------------------------------------

TROUPE_HD inline float exp_of(float x) {
  return expf(x);
}
TROUPE_HD inline double exp_of(double x) {
  return exp(x);
}
TROUPE_HD inline float log_of(float x) {
  return logf(x);
}
TROUPE_HD inline double log_of(double x) {
  return log(x);
}

/// One row z[0..classes) of softmax cross-entropy, stable (the row's maximum
/// subtracted), accumulated in Real (the CPU: double; a GPU thread: float).
/// Returns the row's loss, sets *correct to whether the first largest logit
/// is the label's and, when grad is given, writes
/// (softmax - onehot) * inv_rows into grad[0..classes).
template <class Real>
TROUPE_HD inline Real softmax_xent_row(const float* z, int64_t classes, int32_t label,
                                       float inv_rows, float* grad, bool* correct) {
  float top = z[0];
  int64_t best = 0;
  for (int64_t j = 1; j < classes; ++j)
    if (z[j] > top) {
      top = z[j];
      best = j;
    }
  Real sum = 0;
  for (int64_t j = 0; j < classes; ++j)
    sum += exp_of(static_cast<Real>(z[j] - top));
  *correct = best == label;
  if (grad)
    for (int64_t j = 0; j < classes; ++j)
      grad[j] = (static_cast<float>(exp_of(static_cast<Real>(z[j] - top)) / sum)
                 - (j == label ? 1.0f : 0.0f))
                * inv_rows;
  return log_of(sum) - static_cast<Real>(z[label] - top);
}

} // namespace troupe::shared
