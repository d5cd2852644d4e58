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

/// One shard's rows of a table, copied bucket by bucket, each bucket under
/// its lock: a row's value, slots and counters always come from the same
/// update (DeepRec#1023).
class table_snapshot {
public:
  explicit table_snapshot(const embedding_table& table);

  size_t rows() const { return keys_.size(); }
  /// The file entries, in the order append_to writes them.
  std::vector<safetensors_writer::entry> entries() const;
  /// The metadata entry: "emb/<table>" -> the layout restore checks.
  std::pair<std::string, std::string> metadata() const;
  void append_to(safetensors_writer& writer) const;
  /// The entries' bytes, in entries() order (for a copy that travels
  /// before it is written: a shard's checkpoint copy).
  std::vector<std::pair<const void*, size_t>> blocks() const;

private:
  std::string prefix_;
  std::string layout_;
  uint32_t dim_;
  std::vector<std::string> slot_names_;
  std::vector<int64_t> keys_;
  std::vector<std::vector<float>> fields_; ///< values, then each slot: n x dim each
  std::vector<uint32_t> frequencies_, last_updates_, bucket_rows_;
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
