#pragma once
// Embedding tables for shard tests: one plain-SGD table whose rows the
// tests can predict (rate 1: a row moves by minus its summed gradient).
#include <cstdint>

#include "tensor/sparse/table_setup.hpp"

namespace troupe::testing {

/// The table "embedding": rows of `dim` floats drawn by `init`, SGD at
/// rate 1, keys in `buckets`, at most `max_keys` keys a request.
inline table_setup sgd_table_setup(uint32_t dim, row_init init, bucket_layout buckets,
                                   int64_t max_keys) {
  table_setup s;
  s.table.name = "embedding";
  s.table.dim = dim;
  s.table.init = init;
  s.table.optimizer.kind = sparse_optimizer_kind::sgd;
  s.table.optimizer.learning_rate = 1.0;
  s.table.buckets = buckets;
  s.max_keys = max_keys;
  return s;
}

} // namespace troupe::testing
