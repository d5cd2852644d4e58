#pragma once
// Which PS shard holds which variable. A small interface so that issue 5's
// byte-aware strategies drop in beside TF's round robin.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/model.hpp"

namespace troupe {

class placement_strategy {
public:
  virtual ~placement_strategy() = default;
  virtual const char* name() const = 0;
  /// One shard index per variable, in the order given.
  virtual std::vector<int32_t> place(const std::vector<variable_spec>& variables,
                                     int32_t num_shards) const = 0;
};

/// TF's replica_device_setter default: variable i goes to shard i % n, in
/// creation order, whatever its size.
class round_robin_placement final : public placement_strategy {
public:
  const char* name() const override { return "round_robin"; }
  std::vector<int32_t> place(const std::vector<variable_spec>& variables,
                             int32_t num_shards) const override;
};

/// A strategy by name; throws troupe_error listing the known names.
std::unique_ptr<placement_strategy> make_placement(const std::string& name);

/// The names make_placement accepts.
const std::vector<std::string>& placement_names();

} // namespace troupe
