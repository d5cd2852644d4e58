#pragma once
// The state of one PS shard, without CAF: named variables, the optimizer that
// updates them (its slots live here too) and the checks every request
// passes. A refused request leaves the store exactly as it was.
//
// The shard actor is its only writer. Its bulk connections' threads read it
// too (pin), to answer pulls without a hop through the actor: every change
// of what they read (initialize, apply_gradients, reset) holds the store's
// lock exclusively, pin holds it shared while it takes its pointers.
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/core/wire_precision.hpp"
#include "tensor/optim/optimizer.hpp"

namespace troupe {

class variable_store {
public:
  /// `owner` names the shard in error messages ("ps:1").
  variable_store(std::string owner, const optimizer_config& optimizer);

  /// Sets the first values of `run`; refused if already initialised or
  /// malformed. `version` is the update count to continue from (a restored
  /// checkpoint's).
  maybe_failure initialize(const std::vector<std::string>& names, std::vector<tensor> values,
                           int64_t version = 0, uint64_t run = 0);

  /// Back to nothing held (a new run replaces the old one's state).
  void reset();

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

  /// Why a request of `run` is refused: it belongs to another run than the
  /// initialised one (none before initialisation). The one run check of
  /// pulls and pushes, over BASP and the bulk path alike.
  std::optional<std::string> other_run(uint64_t run) const;

  /// share() for a peer of `run`, from any thread, with the version the
  /// values are at; refused before initialisation and for another run.
  /// At a reduced `precision` (a wire_precision as a message named it) the
  /// values come packed, in tensors of their own.
  maybe_failure pin(uint64_t run, const std::vector<std::string>& names,
                    std::vector<std::shared_ptr<const tensor>>& out, int64_t& version,
                    int32_t precision = 0) const;
  /// Gradients a push packed at `precision` (as its message named it: a
  /// wire_precision, or topk_wire_code for top-k pairs),
  /// widened into `out` (its tensors' storage reused) with their variables'
  /// shapes (unpack_wire); refused for an unknown form or variable, or a
  /// packed size that does not fit. fp32 gradients are the caller's to use as they are.
  maybe_failure widen_gradients(const std::vector<std::string>& names, int32_t precision,
                                const std::vector<tensor>& packed, std::vector<tensor>& out) const;

  /// Whether apply_gradients would accept these gradients.
  maybe_failure check_gradients(const std::vector<std::string>& names,
                                const std::vector<tensor>& gradients) const;

  /// One optimizer step for every named variable (at step version()), or
  /// nothing at all if any name is unknown, any shape differs or any gradient
  /// is not finite.
  maybe_failure apply_gradients(const std::vector<std::string>& names,
                                const std::vector<tensor>& gradients);
  /// apply_gradients without the checks, for a caller that made them
  /// (check_gradients). With no names it is an update of nothing: the
  /// version still counts it (a step of a shard that holds only rows).
  void apply_checked(const std::vector<std::string>& names, const std::vector<tensor>& gradients);

  bool initialized() const noexcept { return initialized_; }
  /// Number of updates applied.
  int64_t version() const noexcept { return version_; }
  size_t size() const noexcept { return variables_.size(); }
  /// Total bytes of the variables held.
  size_t bytes() const noexcept;

private:
  std::optional<std::string> other_run_locked(uint64_t run) const;
  maybe_failure share_locked(const std::vector<std::string>& names,
                             std::vector<std::shared_ptr<const tensor>>& out) const;
  /// The named variables' slots in the map, in the order asked.
  maybe_failure lookup(const std::vector<std::string>& names,
                       std::vector<const std::shared_ptr<tensor>*>& found) const;
  maybe_failure check(const std::vector<std::string>& names, const std::vector<tensor>& gradients,
                      std::vector<const std::shared_ptr<tensor>*>& found) const;
  void apply_found(const std::vector<std::string>& names,
                   const std::vector<const std::shared_ptr<tensor>*>& found,
                   const std::vector<tensor>& gradients);

  std::string owner_;
  std::vector<std::string> slot_names_;
  optimizer_config optimizer_config_;
  std::unique_ptr<optimizer> optimizer_;
  mutable std::shared_mutex lock_; // see the top of this file
  bool initialized_ = false;
  uint64_t run_ = 0;
  int64_t version_ = 0;
  std::unordered_map<std::string, std::shared_ptr<tensor>> variables_;
};

} // namespace troupe
