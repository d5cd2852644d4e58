#include "actors/worker/param_buffers.hpp"

namespace troupe {

void param_buffers::reset(const slice_router& router, host_staging* staging, size_t variables,
                          wire_precision precision, double push_topk) {
  router_ = &router;
  staging_ = staging;
  precision_ = precision;
  topk_ = push_topk;
  residual_.clear();
  params_.resize(variables);
  grads_.resize(variables);
  packed_spare_.clear();
}

bool param_buffers::whole(size_t slice) const {
  return router_->slice(slice).shape == router_->slice(slice).full_shape;
}

std::vector<tensor> param_buffers::lend(const slice_router::shard_part& part) {
  std::vector<tensor> out(part.slices.size());
  if (!staging_ && !packs_pulls()) // packed values land in the exchange's own storage
    for (size_t k = 0; k < part.slices.size(); ++k)
      if (whole(part.slices[k]))
        out[k] = std::move(params_[router_->variable_of(part.slices[k])]);
  return out;
}

maybe_failure param_buffers::take(const slice_router::shard_part& part,
                                  std::vector<tensor>& values) {
  if (packs_pulls()) // widened in place: `values` stays, packed, for the next pull
    return widen(part, values);
  return gather(part, values);
}

// Values into the parameters (or a staged model's buffers) by the router;
// its refusal of a count or shape returned, not thrown.
maybe_failure param_buffers::gather(const slice_router::shard_part& part,
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
  if (staging_ || packs_pulls()) // copied or widened: `values` stays as it is
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
  if (packs_pushes())
    return pack_push(part);
  return staging_ ? router_->cut(part, staging_->grads) : router_->cut(part, grads_);
}

void param_buffers::give_back(const slice_router::shard_part& part, std::vector<tensor>& sent,
                              bool aside) {
  if (packs_pushes()) { // packed storage: the gradients never left
    if (packed_spare_.size() <= static_cast<size_t>(part.shard))
      packed_spare_.resize(static_cast<size_t>(part.shard) + 1);
    packed_spare_[static_cast<size_t>(part.shard)] = std::move(sent);
    return;
  }
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

// A packed pull's values widened into the parameters.
maybe_failure param_buffers::widen(const slice_router::shard_part& part,
                                   const std::vector<tensor>& values) {
  if (values.size() != part.slices.size())
    return failure{errc::invalid_request, "a pull answered " + std::to_string(values.size())
                                            + " values for " + std::to_string(part.slices.size())
                                            + " slices"};
  // Whole variables of a host model go straight into the parameters
  // (their storage reused); slices and a staged model's buffers through
  // the router, as a part of their own.
  slice_router::shard_part routed{part.shard, {}, {}};
  widened_.resize(values.size());
  size_t n = 0;
  for (size_t k = 0; k < values.size(); ++k) {
    auto i = part.slices[k];
    bool direct = !staging_ && whole(i);
    auto& into = direct ? params_[router_->variable_of(i)] : widened_[n];
    into.resize(router_->slice(i).shape);
    if (auto err = unpack(values[k], precision_, into.data(), into.size()))
      return failure{err->code, part.names.at(k) + ": " + err->message};
    if (!direct) {
      routed.names.push_back(part.names.at(k));
      routed.slices.push_back(i);
      ++n;
    }
  }
  if (n == 0)
    return std::nullopt;
  widened_.resize(n);
  return gather(routed, widened_);
}

// A push packed from the gradients into the shard's returned storage:
// whole variables straight from where they are (the host gradients or a
// staged model's buffers), slices of one cut first.
std::vector<tensor> param_buffers::pack_push(const slice_router::shard_part& part) {
  slice_router::shard_part sliced{part.shard, {}, {}};
  for (size_t k = 0; k < part.slices.size(); ++k)
    if (!whole(part.slices[k])) {
      sliced.names.push_back(part.names.at(k));
      sliced.slices.push_back(part.slices[k]);
    }
  auto cuts = staging_ ? router_->cut(sliced, staging_->grads) : router_->cut(sliced, grads_);
  auto shard = static_cast<size_t>(part.shard);
  if (packed_spare_.size() <= shard)
    packed_spare_.resize(shard + 1);
  std::vector<tensor> out = std::move(packed_spare_[shard]);
  out.resize(part.slices.size());
  size_t c = 0;
  for (size_t k = 0; k < part.slices.size(); ++k) {
    auto i = part.slices[k];
    const float* from = nullptr;
    size_t count = 0;
    if (whole(i)) {
      auto v = router_->variable_of(i);
      from = staging_ ? staging_->grads.at(v) : grads_.at(v).data();
      count = staging_ ? staging_->sizes.at(v) : grads_.at(v).size();
    } else {
      from = cuts[c].data();
      count = cuts[c++].size();
    }
    if (sparsifies()) {
      if (residual_.size() <= i)
        residual_.resize(router_->plan().size());
      pack_topk(from, count, topk_, residual_[i], out[k]);
    } else {
      troupe::pack(from, count, precision_, out[k]);
    }
  }
  return out;
}

} // namespace troupe
