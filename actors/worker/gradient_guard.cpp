#include "actors/worker/gradient_guard.hpp"

#include <cmath>

#include "tensor/optim/optimizer.hpp"

namespace troupe {

namespace {

bool proven_finite(double device_norm) {
  return device_norm >= 0 && std::isfinite(device_norm);
}

} // namespace

std::optional<size_t> gradient_guard::check_and_clip(std::vector<tensor>& grads,
                                                     double device_norm) const {
  if (!proven_finite(device_norm))
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].all_finite())
        return i;
  if (clip_norm_ > 0)
    clip_by_global_norm(grads, clip_norm_, device_norm);
  return std::nullopt;
}

std::optional<size_t> gradient_guard::check_and_clip(const host_staging& staging,
                                                     double device_norm) const {
  if (!proven_finite(device_norm))
    for (size_t i = 0; i < staging.grads.size(); ++i)
      if (first_non_finite(staging.grads[i], staging.sizes[i]) != staging.sizes[i])
        return i;
  if (clip_norm_ > 0)
    clip_by_global_norm(staging.grads, staging.sizes, clip_norm_, device_norm);
  return std::nullopt;
}

} // namespace troupe
