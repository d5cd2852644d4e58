#pragma once
// Where an embedding key lives and what it starts as: the key mixer, the
// stable hash of categorical strings, virtual buckets, TF's fixed-size table
// partitioning (mod and div) and the deterministic initial row. Everything
// here is a pure function of its arguments, so every task of a cluster (and
// every shard count) agrees on it without talking.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"

namespace troupe {

/// MurmurHash3's 64-bit finalizer: every input bit reaches every output bit.
/// Keys are mixed before bucketing because real ids are dense ranges and
/// std::hash<int64_t> is the identity (byteps#116).
constexpr uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/// FNV-1a over the bytes, then mix64: stable across platforms and releases
/// (docs/embeddings.md documents it, checkpoints depend on it).
uint64_t hash_bytes(std::string_view bytes);

/// The int64 key of a categorical value in the data. A value that is a
/// decimal integer in [0, 2^48) is its own key (ids stay ids, so fixed-size
/// tables can index them); anything else is 2^48 | (hash_bytes(value) mod
/// 2^47). Keys are therefore never negative.
int64_t category_key(std::string_view value);

/// Largest id a fixed-size table or a plain integer value may hold.
constexpr int64_t max_plain_id = (int64_t{1} << 48) - 1;

/// Fields one table may share (Criteo's 26 categorical fields in one table).
constexpr uint32_t max_shared_fields = (1u << 13) - 1;

/// The key of `value` in field `field` (0-based, < max_shared_fields) of a
/// table several fields share: (field + 1) << 49 | category_key(value), so
/// equal values of two fields never meet in a row.
int64_t field_key(uint32_t field, std::string_view value);

/// Keys go to one of `count` virtual buckets (a power of two) by the top bits
/// of mix64(key ^ seed); buckets go to shards in contiguous ranges, so a
/// checkpoint moves whole buckets onto any shard count.
struct bucket_layout {
  uint32_t count = 1024;
  uint64_t seed = 0;

  uint32_t bucket_of(int64_t key) const;
  /// The shard that holds `bucket` when there are `shards` of them: bucket
  /// b goes to floor(b * shards / count), every shard getting count/shards
  /// buckets give or take one.
  uint32_t shard_of_bucket(uint32_t bucket, uint32_t shards) const;
  uint32_t shard_of(int64_t key, uint32_t shards) const {
    return shard_of_bucket(bucket_of(key), shards);
  }
  /// What is wrong with the layout (count not a power of two in [1, 2^20]).
  maybe_failure check() const;
};

/// TF's partition strategies for embedding_lookup over a partitioned
/// variable of `rows` rows in `parts` parts.
enum class partition_strategy { mod, div };

TROUPE_ENUM_NAMES(partition_strategy, {partition_strategy::mod, "mod"},
                  {partition_strategy::div, "div"});

struct part_row {
  int64_t part;
  int64_t row;
  friend bool operator==(const part_row& a, const part_row& b) {
    return a.part == b.part && a.row == b.row;
  }
};

/// Where id `id` (0 <= id < rows) lives, with embedding_ops.py's arithmetic:
/// mod: part id % P, row id / P. div: the first rows % P parts hold
/// rows / P + 1 rows, the others rows / P. Throws troupe_error on an id out
/// of range or parts < 1.
part_row locate(partition_strategy strategy, int64_t id, int64_t rows, int64_t parts);

/// A table's kind: hash (int64 keys, rows created on first push, placed by
/// bucket) or fixed (TF1's embedding_lookup over one partitioned variable
/// [rows, dim]: ids in [0, rows), placed by the partition strategy).
enum class table_kind { hash, fixed };

TROUPE_ENUM_NAMES(table_kind, {table_kind::hash, "hash"}, {table_kind::fixed, "fixed"});

/// How a fixed-size table turns a field's values into rows: identity (TF's
/// categorical_column_with_identity: an integer id is its row, strings are
/// hashed) or hash (TF's categorical_column_with_hash_bucket: every value is
/// hashed, as Criteo's hex tokens want).
enum class id_mapping { identity, hash };

TROUPE_ENUM_NAMES(id_mapping, {id_mapping::identity, "identity"}, {id_mapping::hash, "hash"});

/// A fixed-size table's ids: each categorical field its own range of rows
/// (its vocabulary), the ranges laid end to end in one table, as TF's
/// identity and hash-bucket columns sharing one partitioned variable.
class fixed_vocabulary {
public:
  fixed_vocabulary() = default;
  /// One size per field, each >= 1, the total at most max_plain_id + 1;
  /// throws troupe_error otherwise.
  explicit fixed_vocabulary(std::vector<int64_t> sizes, id_mapping mapping = id_mapping::identity);
  bool empty() const noexcept { return sizes_.empty(); }
  const std::vector<int64_t>& sizes() const noexcept { return sizes_; }
  int64_t rows() const noexcept { return rows_; }
  /// The row of data key `key` found in field `field`. identity: an integer
  /// id i (below 2^48) is row offset + i and must be below the field's size
  /// (TF refuses it otherwise; so does this, a data_error naming the field,
  /// the id and embedding.vocabulary), a string offset + its hash mod size.
  /// hash: every value offset + mix64(its key) mod size.
  int64_t row_of(int64_t key, uint32_t field) const;

private:
  std::vector<int64_t> sizes_;
  id_mapping mapping_ = id_mapping::identity;
  std::vector<int64_t> offsets_;
  int64_t rows_ = 0;
};

/// How a row that nobody pushed yet starts.
enum class row_initializer { zeros, uniform, normal, truncated_normal };

TROUPE_ENUM_NAMES(row_initializer, {row_initializer::zeros, "zeros"},
                  {row_initializer::uniform, "uniform"}, {row_initializer::normal, "normal"},
                  {row_initializer::truncated_normal, "truncated_normal"});

struct row_init {
  row_initializer kind = row_initializer::truncated_normal;
  /// normal, truncated_normal: the standard deviation; uniform: values in
  /// [-scale, scale).
  double scale = 0.01;
  uint64_t seed = 0;
};

/// Writes the initial value of `key` in table `table` (a hash of the table's
/// name): a counter-based draw, a function of (seed, table, key, element)
/// only, so a pull of an unseen key, the push that creates the row and any
/// shard count agree. truncated_normal redraws beyond two deviations, as TF.
void initial_row(const row_init& init, uint64_t table, int64_t key, float* out, uint32_t dim);

} // namespace troupe
