#pragma once
// The training plan: every slice of the model's variables and the ps shard
// that holds it, as the chief builds it and every worker receives it
// (protocol.hpp sends it as training_plan), and slice_router, which checks a
// plan against a model and moves values between the model's variables and
// the slices each shard holds, for the workers and the chief alike.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/nn/model.hpp"
#include "tensor/plan/placement.hpp"

namespace troupe {

/// One slice of a model variable and the shard that holds it. A whole
/// variable is one slice named like the variable.
struct planned_slice {
  std::string name;     ///< "<variable>/part_<i>", or the variable's name
  int32_t shard = 0;    ///< the ps shard holding it
  int32_t variable = 0; ///< index into the model's variables
  int32_t axis = 0;     ///< the axis the variable is split along
  int64_t offset = 0;   ///< first index along that axis
  int64_t extent = 1;   ///< indices along that axis
};

/// The plan of a placement: each placed slice with its variable's index.
/// Throws troupe_error when a slice names no variable of `variables`.
std::vector<planned_slice> build_plan(const std::vector<placed_slice>& placement,
                                      const std::vector<variable_spec>& variables);

/// A plan as one model uses it. The constructor checks the plan against the
/// model: every slice fits its variable, every variable is covered exactly
/// once along one axis (or rows would go untrained, never written when pulls
/// land in a GPU model's buffers, and others be pushed twice), and every
/// shard index is below num_shards; it throws troupe_error naming the
/// problem. Then it groups the slices by shard, so that a step sends each
/// shard one request.
class slice_router {
public:
  /// The slices one shard holds.
  struct shard_part {
    int32_t shard = 0;
    std::vector<std::string> names; ///< the slices' names, in plan order
    std::vector<size_t> slices;     ///< their indices into the plan
  };

  slice_router(std::vector<planned_slice> plan, const std::vector<variable_spec>& variables,
               int32_t num_shards);

  /// The shards that hold something, in shard order.
  const std::vector<shard_part>& parts() const noexcept { return parts_; }
  const std::vector<planned_slice>& plan() const noexcept { return plan_; }
  /// Plan slice i as a slice of its variable.
  const variable_slice& slice(size_t i) const { return slices_.at(i); }
  size_t variable_of(size_t i) const { return static_cast<size_t>(plan_.at(i).variable); }

  /// Puts the values of a part (in its order) into their variables: moved
  /// when a slice is a whole variable, its rows copied otherwise. Throws
  /// troupe_error on a count or shape that does not fit.
  void gather(const shard_part& part, std::vector<tensor>&& values,
              std::vector<tensor>& variables) const;

  /// The same into buffers of each variable's values (a model's staging).
  void gather(const shard_part& part, const std::vector<tensor>& values,
              const std::vector<float*>& variables) const;

  /// The values of a part's slices, cut from the variables: a whole variable
  /// is moved out of `variables` (it is sent, not kept), a slice copied.
  std::vector<tensor> cut(const shard_part& part, std::vector<tensor>& variables) const;

  /// The same from buffers of each variable's values (a model's staging).
  std::vector<tensor> cut(const shard_part& part, const std::vector<float*>& variables) const;

private:
  std::vector<planned_slice> plan_;
  std::vector<variable_slice> slices_;
  std::vector<shard_part> parts_;
};

} // namespace troupe
