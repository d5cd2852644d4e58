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
#include <deque>
#include <optional>
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

/// A table's layout as a file records it (its metadata's "emb/<table>"):
/// what a reader that does not know the run's config needs.
struct saved_layout {
  uint32_t dim = 0;
  bucket_layout buckets;
  table_kind kind = table_kind::hash;
  std::string text; ///< as recorded, for messages
};

/// The layout of table `table` in `file`; throws checkpoint_error naming
/// `where` when the file records none, or one that does not parse or names
/// an invalid bucket layout.
saved_layout read_saved_layout(const safetensors_file& file, const std::string& table,
                               const std::string& where);

/// Rows of one table for one shard, read back from a checkpoint.
struct saved_rows {
  uint32_t shard = 0;
  std::vector<int64_t> keys;
  std::vector<uint32_t> frequencies;
  std::vector<uint32_t> last_updates;
  /// One payload after another (embedding_table::payload_floats() each):
  /// the value, then each optimizer slot.
  std::vector<float> payloads;
};

/// A table's rows in checkpoint files, handed out in batches of at most
/// `batch` rows, each for the shard of `shards` that owns its rows. The
/// files are read `batch` rows at a time, so that a restore holds a few
/// batches, never the whole table. Opening checks each file: it holds the
/// table under the same layout (dim, buckets, seed, optimizer), and its
/// tensors agree in length; a key the table cannot hold is refused when its
/// rows are read. Both throw checkpoint_error naming the table.
class saved_table_reader {
public:
  saved_table_reader(std::vector<const safetensors_file*> files,
                     const embedding_table_config& config, uint32_t shards, size_t batch);

  /// The next batch: a full one while rows remain to be read, then what is
  /// left for each shard; none once every row was handed out.
  std::optional<saved_rows> next();
  /// Rows in the files, all of them.
  size_t rows() const { return rows_; }
  /// Rows handed out so far for each shard.
  const std::vector<size_t>& rows_out() const { return rows_out_; }

private:
  void read_range();

  embedding_table_config config_;
  std::string prefix_;
  std::vector<std::string> fields_; ///< "values", then the slots' names
  std::vector<std::pair<const safetensors_file*, size_t>> files_; ///< each with its rows
  size_t batch_;
  size_t rows_ = 0;
  size_t file_ = 0;                 ///< the file being read
  size_t at_ = 0;                   ///< its next row
  std::vector<saved_rows> pending_; ///< by shard, filling
  std::deque<saved_rows> ready_;
  std::vector<size_t> rows_out_;
  // One range as read, reused: keys, counters, each field's [n, dim].
  std::vector<int64_t> keys_;
  std::vector<uint32_t> frequencies_, last_updates_;
  std::vector<std::vector<float>> values_;
};

/// Restores the rows of `file` into the shards' tables in one pass over the
/// file, a range of rows at a time: a row goes to shards[s] where shard s of
/// shards.size() owns its bucket (a null entry: rows not restored here); how
/// many were restored. Every table must have the same config. Throws
/// checkpoint_error as saved_table_reader does.
size_t restore_table_rows(const safetensors_file& file,
                          const std::vector<embedding_table*>& shards);
/// The same for one shard of `shards`.
size_t restore_table_rows(const safetensors_file& file, embedding_table& table, uint32_t shard,
                          uint32_t shards);

} // namespace troupe
