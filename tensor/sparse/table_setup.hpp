#pragma once
// Everything a shard needs to hold its part of one embedding table: the
// table itself, when rows enter (admission) and leave it (eviction), how
// sync mode averages a row, and the most keys one request may name. The
// chief builds it from the [embedding] section and sends it with each
// shard's first values, so that every shard holds the same rules.
#include <cstdint>

#include "tensor/sparse/embedding_table.hpp"
#include "tensor/sparse/row_accumulator.hpp"

namespace troupe {

/// When a pushed key gets a row (embedding.admit-after, admit-probability).
/// A key not admitted reads its initial value and its gradient is dropped.
struct admission_rules {
  /// Occurrences a key must reach before its row is created (0, 1: at once).
  uint32_t after_count = 0;
  /// The chance a push creates a key's row (1: always), drawn from a hash
  /// of (key, table version), so that it follows from the run's seed.
  double probability = 1.0;
};

struct table_setup {
  embedding_table_config table;
  admission_rules admission;
  eviction_rules eviction;
  /// Table versions between two eviction passes.
  int64_t evict_interval = 100;
  sync_reduction reduction = sync_reduction::per_row;
  /// Keys one pull or push may name.
  int64_t max_keys = int64_t{1} << 20;

  /// What is wrong, if anything (errc::invalid_setting, naming the key).
  maybe_failure check() const;
};

namespace table_limits {
constexpr int64_t max_keys_per_request = int64_t{1} << 24;
constexpr uint32_t max_admit_after = 1u << 20;
/// Keys below the admission count a shard remembers per table; beyond, the
/// counts start over (a stream of one-off keys cannot grow it without bound).
constexpr size_t max_pending_keys = size_t{1} << 20;
} // namespace table_limits

} // namespace troupe
