#pragma once
// An embedding model's table taken away from the shards: its rows by key
// (values only; the optimizer's slots stay in the checkpoints), gathered
// from a checkpoint's files or read from an export, and looked up for
// predictions as in training (a key the table lacks reads its initial
// value).
#include <memory>
#include <string>
#include <vector>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/sparse/embedding_table.hpp"

namespace troupe {

struct model_card;

constexpr const char* table_keys_name = "embedding/keys";
constexpr const char* table_values_name = "embedding/values";

/// Rows by key, in bucket order.
struct table_rows {
  std::vector<int64_t> keys;
  std::vector<float> values; ///< keys × dim
};

table_rows rows_of(const embedding_table& table);

/// The table of `card`'s model (values only, its initial rows as trained),
/// filled from every file of `reader` that holds "emb/embedding/...".
std::shared_ptr<embedding_table> table_from_checkpoint(const checkpoint_reader& reader,
                                                       const model_card& card);

/// The same from an export's model.safetensors.
std::shared_ptr<embedding_table> table_from_export(const safetensors_file& weights,
                                                   const model_card& card);

} // namespace troupe
