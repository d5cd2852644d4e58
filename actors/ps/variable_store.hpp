#pragma once
// The state of one PS shard, without CAF: named variables, the optimizer that
// updates them (its slots live here too) and the checks every request
// passes. A refused request leaves the store exactly as it was.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/optim/optimizer.hpp"

namespace troupe {

class variable_store {
public:
  /// `owner` names the shard in error messages ("ps:1").
  variable_store(std::string owner, const optimizer_config& optimizer);

  /// Sets the first values; refused if already initialised or malformed.
  /// `version` is the update count to continue from (a restored checkpoint's).
  maybe_failure initialize(const std::vector<std::string>& names, std::vector<tensor> values,
                           int64_t version = 0);

  /// Sets slot `key` ("<variable>/<slot>") of a held variable from a
  /// checkpoint; refused for an unknown variable or slot, another shape or
  /// a value that is not finite.
  maybe_failure restore_slot(const std::string& key, tensor value);

  /// A copy of everything the shard holds at this version: the variables,
  /// then their slots ("<variable>/<slot>"), each sorted by name.
  struct snapshot {
    int64_t version = 0;
    std::vector<std::string> names;
    std::vector<tensor> values;
  };
  snapshot take_snapshot() const;

  /// The named values themselves, without a copy, in the order asked. They
  /// stay as they are while `out` holds them: the next update of a value
  /// still held copies it first (copy-on-write).
  maybe_failure share(const std::vector<std::string>& names,
                      std::vector<std::shared_ptr<const tensor>>& out) const;

  /// Whether apply_gradients would accept these gradients.
  maybe_failure check_gradients(const std::vector<std::string>& names,
                                const std::vector<tensor>& gradients) const;

  /// One optimizer step for every named variable (at step version()), or
  /// nothing at all if any name is unknown, any shape differs or any gradient
  /// is not finite.
  maybe_failure apply_gradients(const std::vector<std::string>& names,
                                const std::vector<tensor>& gradients);

  bool initialized() const noexcept { return initialized_; }
  /// Number of updates applied.
  int64_t version() const noexcept { return version_; }
  size_t size() const noexcept { return variables_.size(); }
  /// Total bytes of the variables held.
  size_t bytes() const noexcept;

private:
  maybe_failure lookup(const std::vector<std::string>& names,
                       std::vector<const tensor*>& found) const;
  maybe_failure check(const std::vector<std::string>& names, const std::vector<tensor>& gradients,
                      std::vector<const tensor*>& found) const;

  std::string owner_;
  std::vector<std::string> slot_names_;
  std::unique_ptr<optimizer> optimizer_;
  bool initialized_ = false;
  int64_t version_ = 0;
  std::unordered_map<std::string, std::shared_ptr<tensor>> variables_;
};

} // namespace troupe
