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

/// Appends the table's keys (I64[rows()]), then its values (F32[rows(),
/// dim]), both in bucket order, to the writer's next two entries, a bucket
/// at a time: no copy of the whole table.
void append_table_rows(safetensors_writer& writer, const embedding_table& table);

/// The table of `card`'s model (values only, its initial rows as trained),
/// filled from every file of `reader` that holds "emb/embedding/...".
std::shared_ptr<embedding_table> table_from_checkpoint(const checkpoint_reader& reader,
                                                       const model_card& card);

/// The same from an export's model.safetensors.
std::shared_ptr<embedding_table> table_from_export(const safetensors_file& weights,
                                                   const model_card& card);

} // namespace troupe
