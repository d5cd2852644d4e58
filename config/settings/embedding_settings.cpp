#include "config/settings/embedding_settings.hpp"

#include <cmath>
#include <string>

#include "tensor/sparse/keys.hpp"

namespace troupe {

table_setup table_setup_of(const embedding_settings& e, const table_spec& table, uint64_t seed) {
  table_setup out;
  out.table.name = table.name;
  out.table.dim = table.dim;
  out.table.init = {e.initializer, e.init_scale, seed};
  out.table.optimizer = e.optimizer;
  out.table.buckets.count = static_cast<uint32_t>(e.buckets);
  out.table.buckets.seed = mix64(seed ^ 0x6275636b657473ull); // "buckets"
  out.table.kind = e.kind;
  out.table.partition = e.partition;
  if (e.kind == table_kind::fixed)
    out.table.rows = fixed_vocabulary(e.vocabulary).rows();
  out.admission.after_count = static_cast<uint32_t>(e.admit_after);
  out.admission.probability = e.admit_probability;
  out.eviction.after_steps = e.evict_after_steps;
  out.eviction.l2_below = e.evict_l2_below;
  out.eviction.max_bytes = static_cast<size_t>(e.max_bytes_per_shard);
  out.evict_interval = e.evict_interval;
  out.reduction = e.reduction;
  out.max_keys = e.max_keys_per_request;
  return out;
}

std::vector<failure> embedding_problems(const embedding_settings& e) {
  std::vector<failure> out;
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  if (e.dim < 1 || e.dim > 1024)
    fail("embedding.dim = " + std::to_string(e.dim) + " is outside 1..1024");
  if (e.buckets < 1 || e.buckets > (int64_t{1} << 20) || (e.buckets & (e.buckets - 1)) != 0)
    fail("embedding.buckets = " + std::to_string(e.buckets)
         + " must be a power of two in 1..1048576 (e.g. 1024)");
  if (e.kind == table_kind::hash && !e.vocabulary.empty())
    fail("embedding.vocabulary applies to embedding.kind = \"fixed\"; remove it, or set the kind");
  if (e.kind == table_kind::fixed) {
    if (e.vocabulary.empty())
      fail("embedding.kind = \"fixed\" needs embedding.vocabulary: the rows of each "
           "categorical field, e.g. [672, 193610]");
    try {
      fixed_vocabulary{e.vocabulary};
    } catch (const troupe_error& err) {
      fail(err.what());
    }
    if (e.admit_after > 1 || e.admit_probability < 1 || e.evict_after_steps > 0
        || e.evict_l2_below > 0 || e.max_bytes_per_shard > 0)
      fail("embedding.admit-* and evict-* apply to hash tables; a fixed-size table "
           "(embedding.kind = \"fixed\") holds every row");
  }
  if (e.admit_after < 0 || e.admit_after > table_limits::max_admit_after)
    fail("embedding.admit-after = " + std::to_string(e.admit_after) + " is outside 0.."
         + std::to_string(table_limits::max_admit_after));
  if (e.max_bytes_per_shard < 0)
    fail("embedding.max-bytes-per-shard must be >= 0 (0: no cap)");
  if (!(e.max_norm >= 0) || !std::isfinite(e.max_norm))
    fail("embedding.max-norm must be 0 (off) or a positive number");
  for (auto w : e.deep_layers)
    if (w < 1 || w > 65536)
      fail("embedding.deep-layers holds " + std::to_string(w) + ", outside 1..65536");
  if (!out.empty())
    return out;
  // The rest is the shards' own check, on the setup they would receive.
  auto setup = table_setup_of(e, {"embedding", static_cast<uint32_t>(1 + e.dim)}, 0);
  if (auto bad = setup.check())
    fail(bad->message);
  return out;
}

} // namespace troupe
