#include "actors/worker/param_buffers.hpp"

namespace troupe {

void param_buffers::reset(const slice_router& router, host_staging* staging, size_t variables) {
  router_ = &router;
  staging_ = staging;
  params_.resize(variables);
  grads_.resize(variables);
}

bool param_buffers::whole(size_t slice) const {
  return router_->slice(slice).shape == router_->slice(slice).full_shape;
}

std::vector<tensor> param_buffers::lend(const slice_router::shard_part& part) {
  std::vector<tensor> out(part.slices.size());
  if (!staging_)
    for (size_t k = 0; k < part.slices.size(); ++k)
      if (whole(part.slices[k]))
        out[k] = std::move(params_[router_->variable_of(part.slices[k])]);
  return out;
}

maybe_failure param_buffers::take(const slice_router::shard_part& part,
                                  std::vector<tensor>& values) {
  try {
    if (staging_)
      router_->gather(part, values, staging_->params);
    else
      router_->gather(part, std::move(values), params_);
  } catch (const std::exception& e) {
    return failure{errc::invalid_request, e.what()};
  }
  return std::nullopt;
}

maybe_failure param_buffers::take_ahead(const slice_router::shard_part& part,
                                        std::vector<tensor>& values) {
  if (staging_) // copied into the model's buffers: `values` stays as it is
    return take(part, values);
  std::vector<tensor> previous(values.size());
  for (size_t k = 0; k < values.size() && k < part.slices.size(); ++k)
    if (whole(part.slices[k]))
      previous[k] = std::move(params_[router_->variable_of(part.slices[k])]);
  if (auto err = take(part, values))
    return err;
  for (size_t k = 0; k < previous.size(); ++k)
    if (whole(part.slices[k]))
      values[k] = std::move(previous[k]);
  return std::nullopt;
}

std::vector<tensor> param_buffers::cut(const slice_router::shard_part& part) {
  return staging_ ? router_->cut(part, staging_->grads) : router_->cut(part, grads_);
}

void param_buffers::give_back(const slice_router::shard_part& part, std::vector<tensor>& sent,
                              bool aside) {
  if (staging_)
    return;
  auto& into = aside ? spare_grads_ : grads_;
  into.resize(grads_.size());
  for (size_t k = 0; k < part.slices.size() && k < sent.size(); ++k)
    if (whole(part.slices[k]))
      into[router_->variable_of(part.slices[k])] = std::move(sent[k]);
}

void param_buffers::reuse_spare() {
  if (staging_)
    return;
  for (size_t v = 0; v < grads_.size() && v < spare_grads_.size(); ++v)
    if (grads_[v].size() == 0)
      grads_[v] = std::move(spare_grads_[v]);
}

} // namespace troupe
