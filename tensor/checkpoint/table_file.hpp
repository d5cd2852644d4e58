#pragma once
// An embedding table's rows in a checkpoint file, stored by key so that a
// checkpoint restores onto any number of shards: each shard writes the rows
// it holds, grouped by virtual bucket, as safetensors tensors named
// "emb/<table>/<field>" (numpy reads them):
//   keys I64[n], values F32[n, dim], one F32[n, dim] per optimizer slot under
//   TF's name ("Adagrad", "Ftrl", "Ftrl_1", "Adam", "Adam_1"), frequencies
//   U32[n], last_updates U32[n], bucket_rows U32[buckets] (rows per bucket,
//   in bucket order);
// and the table's layout in the file's metadata ("emb/<table>": dim,
// buckets, bucket seed, optimizer), checked on restore.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/sparse/embedding_table.hpp"

namespace troupe {

/// One shard's rows of a table at one point, for its checkpoint: a frozen
/// view of the live table (embedding_table::freeze), read piece by piece
/// while updates go on. Taking it records the keys (8 bytes a row); a row
/// is copied only if it changes or leaves before the view ends. Each row is
/// read or copied under its bucket's lock, so its value, slots and counters
/// always come from the same update (DeepRec#1023). The table must outlive
/// the view; the view ends (the copies are freed) when it is destroyed.
class table_snapshot {
public:
  explicit table_snapshot(embedding_table& table);
  ~table_snapshot();
  table_snapshot(table_snapshot&& other) noexcept;
  table_snapshot& operator=(table_snapshot&&) = delete;
  table_snapshot(const table_snapshot&) = delete;
  table_snapshot& operator=(const table_snapshot&) = delete;

  size_t rows() const { return keys_.size(); }
  /// The file entries, in the order append_to writes them.
  std::vector<safetensors_writer::entry> entries() const;
  /// The metadata entry: "emb/<table>" -> the layout restore checks.
  std::pair<std::string, std::string> metadata() const;
  /// Rows [first, first + n) of entries()[entry] as the file holds them
  /// (bucket_rows: buckets), into out. Throws troupe_error when the view
  /// was replaced by a newer one of the same table.
  void copy_rows(size_t entry, size_t first, size_t n, void* out) const;
  /// Bytes of one row of entries()[entry].
  size_t row_bytes(size_t entry) const;
  void append_to(safetensors_writer& writer) const;

private:
  embedding_table* table_;
  uint64_t generation_;
  std::string prefix_;
  std::string layout_;
  uint32_t dim_;
  std::vector<std::string> slot_names_;
  std::vector<int64_t> keys_;
  std::vector<uint32_t> bucket_rows_;
};

/// Restores the rows of `file` into the shards' tables in one pass over the
/// file: a row goes to shards[s] where shard s of shards.size() owns its
/// bucket (a null entry: rows not restored here); how many were restored.
/// Every table must have the same config. Throws checkpoint_error naming
/// the table when the file holds none or its layout (dim, buckets, seed,
/// optimizer) differs, or the file's tensors disagree in length.
size_t restore_table_rows(const safetensors_file& file,
                          const std::vector<embedding_table*>& shards);
/// The same for one shard of `shards`.
size_t restore_table_rows(const safetensors_file& file, embedding_table& table, uint32_t shard,
                          uint32_t shards);

} // namespace troupe
