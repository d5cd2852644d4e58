#pragma once
// An embedding model's table taken away from the shards: its rows by key
// (values only; the optimizer's slots stay in the checkpoints), gathered
// from a checkpoint's files or read from an export, and looked up for
// predictions as in training (a key the table lacks reads its initial
// value).
#include <functional>
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

/// An embedding table's rows as an export writes them: rows() keys
/// (I64[rows()]), then their values (F32[rows(), dim]), each key's values
/// at its place. From a table in memory, or streamed from a checkpoint.
class table_rows {
public:
  virtual ~table_rows() = default;
  virtual size_t rows() const = 0;
  /// Appends the keys, then the values, to the writer's next two entries.
  virtual void append_to(safetensors_writer& writer) const = 0;
  /// f(keys, values, n) for every row, a range at a time (values: n rows
  /// of the table's dim), never the whole table at once. A negative key or
  /// a value that is not finite throws checkpoint_error.
  using range_visitor = std::function<void(const int64_t* keys, const float* values, size_t n)>;
  virtual void for_each_range(const range_visitor& f) const = 0;
  /// The whole table where it is in memory (model.onnx gathers from a
  /// fixed-size one), else null.
  virtual const embedding_table* table() const = 0;
};

/// A table in memory (shared: the rows outlive their source).
std::unique_ptr<table_rows> rows_of_table(std::shared_ptr<const embedding_table> table);

/// A hash table's rows straight from checkpoint files (`files`: each with
/// the name that errors give it), a range of rows at a time: the export
/// never holds the table. Opening reads the headers and each file's rows
/// per bucket, and checks them: the table's layout, the same in every file
/// (dim = card's, buckets, seed), keys, values and bucket rows of one
/// length, and no bucket in two files. Appending checks each row as it
/// passes: a key >= 0, in the bucket its file lists it in, once in that
/// bucket; a finite value. Either throws checkpoint_error naming the file.
/// The files must outlive the rows.
std::unique_ptr<table_rows>
rows_of_saved_table(const std::vector<std::pair<std::string, const safetensors_file*>>& files,
                    const model_card& card);

/// The rows of `card`'s table in `reader`'s checkpoint: a hash table's
/// streamed from its files (rows_of_saved_table), a fixed-size one's
/// rebuilt (model.onnx holds it whole). `reader` must outlive them.
std::unique_ptr<table_rows> rows_of_checkpoint(const checkpoint_reader& reader,
                                               const model_card& card);

/// The table of `card`'s model (values only, its initial rows as trained),
/// filled from every file of `reader` that holds "emb/embedding/...".
std::shared_ptr<embedding_table> table_from_checkpoint(const checkpoint_reader& reader,
                                                       const model_card& card);

/// The same from an export's model.safetensors.
std::shared_ptr<embedding_table> table_from_export(const safetensors_file& weights,
                                                   const model_card& card);

} // namespace troupe
