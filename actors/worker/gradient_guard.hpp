#pragma once
// What a worker checks before it pushes, without CAF: every gradient must be
// finite (shards check too, but a NaN caught by one shard only would leave
// the update half applied), then all of them are clipped by their global
// norm when train.clip-norm > 0 (TF's clip_by_global_norm over every
// variable of the model, which no single shard could compute).
#include <cstddef>
#include <optional>
#include <vector>

#include "tensor/core/tensor.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

class gradient_guard {
public:
  /// clip_norm: 0 turns clipping off.
  explicit gradient_guard(double clip_norm) : clip_norm_(clip_norm) {}

  /// The index of the first variable whose gradient is not finite (nothing is
  /// clipped then), or nullopt once the gradients are clipped. device_norm:
  /// the global norm the model computed on its device, or < 0; a finite one
  /// proves every value finite and saves a pass over them.
  std::optional<size_t> check_and_clip(std::vector<tensor>& grads, double device_norm) const;

  /// The same over a model's staging buffers.
  std::optional<size_t> check_and_clip(const host_staging& staging, double device_norm) const;

private:
  double clip_norm_;
};

} // namespace troupe
