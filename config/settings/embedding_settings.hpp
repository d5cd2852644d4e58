#pragma once
// The [embedding] section: the table that the models of categorical data
// (train.model = lr, fm, mf, deepfm) look up, and the rules the shards hold
// it by (docs/embeddings.md). Typed and checked once, for the config file
// and the library API alike.
#include <cstdint>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/sparse/table_setup.hpp"

namespace troupe {

struct embedding_settings {
  /// fm, mf, deepfm: factors per key (a row holds 1 + dim floats: the
  /// key's linear weight and its factors; lr's rows hold the weight only).
  int64_t dim = 8;
  row_initializer initializer = row_initializer::truncated_normal;
  double init_scale = 0.01; ///< normal kinds: the deviation; uniform: [-scale, scale)
  sparse_optimizer_config optimizer;
  /// hash: rows keyed by int64, created on first push; fixed: TF1's
  /// embedding_lookup over one partitioned variable, each field's ids in
  /// [0, vocabulary[field]) (strings hashed into it), placed by `partition`.
  table_kind kind = table_kind::hash;
  std::vector<int64_t> vocabulary;
  id_mapping ids = id_mapping::identity;
  partition_strategy partition = partition_strategy::mod;
  /// Virtual buckets per table (a power of two): the unit of placement and
  /// of a restore onto another shard count.
  int64_t buckets = 1024;
  int64_t admit_after = 0;         ///< occurrences before a key gets a row (0, 1: at once)
  double admit_probability = 1.0;  ///< the chance a push creates a row
  int64_t evict_after_steps = 0;   ///< rows not updated this many table versions go (0: off)
  double evict_l2_below = 0;       ///< rows whose L2 norm is below this go (0: off)
  int64_t max_bytes_per_shard = 0; ///< above it, least recently updated rows go (0: no cap)
  int64_t evict_interval = 100;    ///< table versions between eviction passes
  sync_reduction reduction = sync_reduction::per_row;
  int64_t max_keys_per_request = int64_t{1} << 20;
  /// > 0: looked-up rows are clipped to this L2 norm (TF's max_norm).
  double max_norm = 0;
  /// deepfm: the widths of the MLP's hidden layers.
  std::vector<int64_t> deep_layers{64, 32};
};

/// The shards' rules for table `table` of a run seeded `seed` (the
/// initial rows and the buckets follow from it).
table_setup table_setup_of(const embedding_settings& e, const table_spec& table, uint64_t seed);

/// Every problem with the section, naming its key.
std::vector<failure> embedding_problems(const embedding_settings& e);

} // namespace troupe
