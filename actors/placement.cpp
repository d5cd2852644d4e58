#include "actors/placement.hpp"

#include "tensor/error.hpp"

namespace troupe {

std::vector<int32_t> round_robin_placement::place(const std::vector<variable_spec>& variables,
                                                  int32_t num_shards) const {
  if (num_shards <= 0)
    throw troupe_error("placement needs at least one PS shard");
  std::vector<int32_t> out(variables.size());
  for (size_t i = 0; i < variables.size(); ++i)
    out[i] = static_cast<int32_t>(i % static_cast<size_t>(num_shards));
  return out;
}

const std::vector<std::string>& placement_names() {
  static const std::vector<std::string> names{"round_robin"};
  return names;
}

std::unique_ptr<placement_strategy> make_placement(const std::string& name) {
  if (name == "round_robin")
    return std::make_unique<round_robin_placement>();
  throw troupe_error("unknown placement '" + name + "' (known: round_robin)");
}

} // namespace troupe
