#include "actors/ps/variable_store.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>

#include "tensor/core/ops.hpp"

namespace troupe {

variable_store::variable_store(std::string owner, const optimizer_config& optimizer)
  : owner_(std::move(owner)), slot_names_(slot_names(optimizer.kind)), optimizer_config_(optimizer),
    optimizer_(make_optimizer(optimizer)) {
}

void variable_store::reset() {
  std::unique_lock<std::shared_mutex> guard{lock_};
  optimizer_ = make_optimizer(optimizer_config_);
  initialized_ = false;
  run_ = 0;
  version_ = 0;
  variables_.clear();
}

maybe_failure variable_store::initialize(const std::vector<std::string>& names,
                                         std::vector<tensor> values, int64_t version,
                                         uint64_t run) {
  std::unique_lock<std::shared_mutex> guard{lock_};
  if (initialized_)
    return failure{errc::already_initialized,
                   owner_ + " is already initialised; the chief initialises exactly once"};
  if (names.size() != values.size())
    return failure{errc::invalid_request, owner_ + ": init with " + std::to_string(names.size())
                                            + " names but " + std::to_string(values.size())
                                            + " values"};
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!seen.insert(names[i]).second)
      return failure{errc::invalid_request,
                     owner_ + ": variable '" + names[i] + "' initialised twice"};
    if (!values[i].all_finite())
      return failure{errc::invalid_request,
                     owner_ + ": initial value of '" + names[i] + "' is not finite"};
  }
  if (version < 0)
    return failure{errc::invalid_request, owner_ + ": init at a negative version"};
  for (size_t i = 0; i < names.size(); ++i)
    variables_.emplace(names[i], std::make_shared<tensor>(std::move(values[i])));
  version_ = version;
  run_ = run;
  initialized_ = true;
  return std::nullopt;
}

maybe_failure variable_store::restore_slot(const std::string& key, tensor value) {
  auto cut = key.rfind('/');
  auto name = cut == std::string::npos ? std::string() : key.substr(0, cut);
  auto slot = cut == std::string::npos ? key : key.substr(cut + 1);
  if (std::find(slot_names_.begin(), slot_names_.end(), slot) == slot_names_.end())
    return failure{errc::invalid_request,
                   owner_ + ": '" + key + "' names no slot of this shard's optimizer"};
  auto i = variables_.find(name);
  if (i == variables_.end())
    return failure{errc::unknown_variable, "no variable '" + name + "' on " + owner_};
  if (value.shape() != i->second->shape())
    return failure{errc::shape_mismatch, "slot '" + key + "' has shape " + to_string(value.shape())
                                           + " but " + owner_ + " holds its variable as "
                                           + to_string(i->second->shape())};
  if (!value.all_finite())
    return failure{errc::invalid_request, owner_ + ": slot '" + key + "' is not finite"};
  optimizer_->restore_slot(key, std::move(value));
  return std::nullopt;
}

variable_store::snapshot variable_store::take_snapshot() const {
  snapshot out;
  out.version = version_;
  std::map<std::string, const tensor*> sorted;
  for (auto& [name, value] : variables_)
    sorted.emplace(name, value.get());
  for (auto& [name, value] : sorted) {
    out.names.push_back(name);
    out.values.push_back(*value);
  }
  for (auto& [key, value] : optimizer_->slots()) {
    out.names.push_back(key);
    out.values.push_back(*value);
  }
  return out;
}

maybe_failure variable_store::lookup(const std::vector<std::string>& names,
                                     std::vector<const std::shared_ptr<tensor>*>& found) const {
  if (!initialized_)
    return failure{errc::not_initialized,
                   owner_ + " is not initialised yet; wait for the chief's ready answer"};
  found.clear();
  for (auto& name : names) {
    auto i = variables_.find(name);
    if (i == variables_.end())
      return failure{errc::unknown_variable, "no variable '" + name + "' on " + owner_};
    found.push_back(&i->second);
  }
  return std::nullopt;
}

std::optional<std::string> variable_store::other_run(uint64_t run) const {
  std::shared_lock<std::shared_mutex> guard{lock_};
  return other_run_locked(run);
}

std::optional<std::string> variable_store::other_run_locked(uint64_t run) const {
  if (!initialized_ || run == run_)
    return std::nullopt;
  return "it belongs to another run (" + std::to_string(run) + ", not " + std::to_string(run_)
         + ")";
}

maybe_failure variable_store::pin(uint64_t run, const std::vector<std::string>& names,
                                  std::vector<std::shared_ptr<const tensor>>& out, int64_t& version,
                                  int32_t precision) const {
  auto wire = wire_precision_of(precision);
  if (!wire)
    return failure{errc::invalid_request, owner_ + " refused a pull at wire precision "
                                            + std::to_string(precision) + " (it knows "
                                            + name_list<wire_precision>() + ")"};
  {
    std::shared_lock<std::shared_mutex> guard{lock_};
    if (auto why = other_run_locked(run))
      return failure{errc::unauthorized, owner_ + " refused a pull: " + *why};
    version = version_;
    if (auto err = share_locked(names, out))
      return err;
  }
  // Packed outside the lock: the pinned values stay as they are meanwhile.
  if (*wire != wire_precision::fp32)
    for (auto& value : out) {
      auto packed = std::make_shared<tensor>();
      pack(value->data(), value->size(), *wire, *packed);
      value = std::move(packed);
    }
  return std::nullopt;
}

maybe_failure variable_store::widen_gradients(const std::vector<std::string>& names,
                                              int32_t precision, const std::vector<tensor>& packed,
                                              std::vector<tensor>& out) const {
  if (names.size() != packed.size())
    return failure{errc::invalid_request, std::to_string(names.size()) + " names but "
                                            + std::to_string(packed.size()) + " gradients"};
  std::shared_lock<std::shared_mutex> guard{lock_};
  std::vector<const std::shared_ptr<tensor>*> found;
  if (auto err = lookup(names, found))
    return err;
  out.resize(packed.size());
  for (size_t i = 0; i < packed.size(); ++i) {
    out[i].resize((*found[i])->shape());
    if (auto err = unpack_wire(packed[i], precision, out[i].data(), out[i].size()))
      return failure{err->code,
                     "gradient of '" + names[i] + "' on " + owner_ + ": " + err->message};
  }
  return std::nullopt;
}

maybe_failure variable_store::share(const std::vector<std::string>& names,
                                    std::vector<std::shared_ptr<const tensor>>& out) const {
  std::shared_lock<std::shared_mutex> guard{lock_};
  return share_locked(names, out);
}

maybe_failure variable_store::share_locked(const std::vector<std::string>& names,
                                           std::vector<std::shared_ptr<const tensor>>& out) const {
  std::vector<const std::shared_ptr<tensor>*> found;
  if (auto err = lookup(names, found))
    return err;
  out.assign(found.size(), nullptr);
  for (size_t i = 0; i < found.size(); ++i)
    out[i] = *found[i];
  return std::nullopt;
}

maybe_failure variable_store::check_gradients(const std::vector<std::string>& names,
                                              const std::vector<tensor>& gradients) const {
  std::vector<const std::shared_ptr<tensor>*> found;
  return check(names, gradients, found);
}

maybe_failure variable_store::check(const std::vector<std::string>& names,
                                    const std::vector<tensor>& gradients,
                                    std::vector<const std::shared_ptr<tensor>*>& found) const {
  if (names.size() != gradients.size())
    return failure{errc::invalid_request, owner_ + ": push with " + std::to_string(names.size())
                                            + " names but " + std::to_string(gradients.size())
                                            + " gradients"};
  if (auto err = lookup(names, found))
    return err;
  for (size_t i = 0; i < names.size(); ++i) {
    if (gradients[i].shape() != (*found[i])->shape())
      return failure{errc::shape_mismatch, "gradient for '" + names[i] + "' has shape "
                                             + to_string(gradients[i].shape()) + " but " + owner_
                                             + " holds it as " + to_string((*found[i])->shape())};
    auto bad = gradients[i].first_non_finite();
    if (bad != gradients[i].size())
      return failure{errc::non_finite_gradient,
                     "gradient for '" + names[i] + "' has a non-finite value at element "
                       + std::to_string(bad) + "; the update was not applied"};
  }
  return std::nullopt;
}

maybe_failure variable_store::apply_gradients(const std::vector<std::string>& names,
                                              const std::vector<tensor>& gradients) {
  std::vector<const std::shared_ptr<tensor>*> found;
  if (auto err = check(names, gradients, found))
    return err;
  apply_found(names, found, gradients);
  return std::nullopt;
}

void variable_store::apply_checked(const std::vector<std::string>& names,
                                   const std::vector<tensor>& gradients) {
  std::vector<const std::shared_ptr<tensor>*> found;
  lookup(names, found); // checked: every name is held
  apply_found(names, found, gradients);
}

void variable_store::apply_found(const std::vector<std::string>& names,
                                 const std::vector<const std::shared_ptr<tensor>*>& found,
                                 const std::vector<tensor>& gradients) {
  // In place unless pinned: no pin may begin until the update is done.
  std::unique_lock<std::shared_mutex> guard{lock_};
  for (size_t i = 0; i < names.size(); ++i) {
    auto& value = const_cast<std::shared_ptr<tensor>&>(*found[i]); // our own map's slot
    if (value.use_count() > 1)
      value = std::make_shared<tensor>(*value); // a pull still sends the old one
    else
      std::atomic_thread_fence(std::memory_order_acquire); // its last reader is done
    optimizer_->apply(names[i], *value, gradients[i], version_);
  }
  ++version_;
}

size_t variable_store::bytes() const noexcept {
  size_t n = 0;
  for (auto& kv : variables_)
    n += kv.second->bytes();
  return n;
}

} // namespace troupe
