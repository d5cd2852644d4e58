#include "tensor/sparse/table_setup.hpp"

#include <cmath>
#include <string>

namespace troupe {

maybe_failure table_setup::check() const {
  auto refuse = [](const std::string& what) { return failure{errc::invalid_setting, what}; };
  // From a peer, an enum may hold any value: each must be one of its names.
  if (std::string(name_of(table.init.kind)) == "?"
      || std::string(name_of(table.optimizer.kind)) == "?" || std::string(name_of(reduction)) == "?"
      || std::string(name_of(table.kind)) == "?" || std::string(name_of(table.partition)) == "?")
    return refuse("embedding table " + table.name
                  + ": an unknown initializer, optimizer, sync-reduction, kind or partition");
  if (auto bad = table.check())
    return bad;
  if (admission.after_count > table_limits::max_admit_after)
    return refuse("embedding.admit-after = " + std::to_string(admission.after_count) + " is above "
                  + std::to_string(table_limits::max_admit_after));
  if (!(admission.probability > 0 && admission.probability <= 1))
    return refuse("embedding.admit-probability must be in (0, 1]");
  if (eviction.after_steps < 0)
    return refuse("embedding.evict-after-steps must be >= 0 (0: off)");
  if (!(eviction.l2_below >= 0) || !std::isfinite(eviction.l2_below))
    return refuse("embedding.evict-l2-below must be >= 0 (0: off)");
  if (table.kind == table_kind::fixed
      && (admission.after_count > 1 || admission.probability < 1 || eviction.after_steps > 0
          || eviction.l2_below > 0 || eviction.max_bytes > 0))
    return refuse("embedding table " + table.name
                  + ": admission and eviction apply to hash tables (embedding.kind = \"hash\"); "
                    "a fixed-size table holds every row");
  if (evict_interval < 1)
    return refuse("embedding.evict-interval must be >= 1");
  if (max_keys < 1 || max_keys > table_limits::max_keys_per_request)
    return refuse("embedding.max-keys-per-request = " + std::to_string(max_keys) + " is outside 1.."
                  + std::to_string(table_limits::max_keys_per_request));
  return std::nullopt;
}

} // namespace troupe
