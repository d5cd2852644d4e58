#pragma once
// One embedding table's rows on one shard, keyed by int64 ids: the part of
// the table whose virtual buckets the shard owns. A row is created by the
// first push that names its key (a pull never inserts: an unseen key reads
// its initial value), updated by the sparse optimizer, and evicted by the
// rules of `eviction_rules`. Pulls may run on other threads than pushes:
// every bucket has its own reader-writer lock, and a bucket's value, slots
// and counters change under one lock, so a checkpoint never sees a row's
// value and slots from different updates (DeepRec#1023). Changes (apply,
// evict, restore) come from one thread at a time (a shard's). A checkpoint reads
// a frozen view (freeze): rows as they were at one point, while updates go
// on, each row copied aside only when it is about to change or leave.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/sparse/keys.hpp"
#include "tensor/sparse/row_map.hpp"
#include "tensor/sparse/sparse_optimizer.hpp"

namespace troupe {

struct embedding_table_config {
  std::string name;
  uint32_t dim = 16;
  row_init init;
  sparse_optimizer_config optimizer;
  /// Where a key's row is stored, and (hash tables) which shard holds it.
  bucket_layout buckets;
  /// fixed: ids in [0, rows), placed as TF's partitioned variable [rows,
  /// dim] in as many parts as shards (part p on shard p).
  table_kind kind = table_kind::hash;
  int64_t rows = 0;
  partition_strategy partition = partition_strategy::mod;

  /// The shard of `key` among `shards` (a fixed table's key: holds(key)).
  uint32_t shard_of(int64_t key, uint32_t shards) const {
    if (kind == table_kind::hash)
      return buckets.shard_of(key, shards);
    return static_cast<uint32_t>(locate(partition, key, rows, shards).part);
  }
  /// Whether `key` may name a row: >= 0, and below rows in a fixed table.
  bool holds(int64_t key) const { return key >= 0 && (kind == table_kind::hash || key < rows); }

  /// What is wrong, if anything (errc::invalid_setting).
  maybe_failure check() const;
};

/// Per-row counters kept beside the value: how often the key was pushed
/// (occurrences, not pushes: recsys-examples#143) and the table version of
/// its last update.
struct row_counters {
  uint32_t frequency = 0;
  uint32_t last_update = 0;
};

/// When rows leave the table. 0 turns a rule off.
struct eviction_rules {
  int64_t after_steps = 0; ///< not updated for this many table versions
  double l2_below = 0;     ///< value's L2 norm below this
  size_t max_bytes = 0;    ///< cap: least recently updated rows go first
};

class embedding_table {
public:
  /// Throws troupe_error when the configuration is invalid.
  explicit embedding_table(embedding_table_config config);
  ~embedding_table();

  const embedding_table_config& config() const { return config_; }
  /// Stable across runs: seeds the rows' initial values.
  uint64_t id() const { return id_; }
  uint32_t dim() const { return config_.dim; }
  /// Floats of a row's value and its slots.
  uint32_t payload_floats() const { return payload_; }

  /// Writes the values of `n` keys into out[n * dim]; an unseen key reads
  /// its initial value. Never inserts.
  void lookup(const int64_t* keys, size_t n, float* out) const;

  /// One update: `n` distinct keys, how many examples named each, and their
  /// summed gradients grads[n * dim], applied by the sparse optimizer at
  /// table version `step`. Refuses duplicate keys, negative keys and
  /// non-finite gradients before changing anything.
  maybe_failure apply(const int64_t* keys, const uint32_t* counts, const float* grads, size_t n,
                      int64_t step);
  /// Whether apply would take these keys and gradients: no negative key,
  /// no key twice, finite gradients.
  maybe_failure check_push(const int64_t* keys, const float* grads, size_t n) const;
  /// apply without the checks, for a caller that made them (check_push).
  void apply_checked(const int64_t* keys, const uint32_t* counts, const float* grads, size_t n,
                     int64_t step);

  /// Whether `key` has a row (it was pushed and not evicted since).
  bool contains(int64_t key) const;
  /// Removes the rows of `n` keys (a key without one is passed over); how
  /// many were removed. A delta's deletions (tensor/export/delta_export.hpp).
  size_t erase(const int64_t* keys, size_t n);

  size_t rows() const { return rows_.load(std::memory_order_relaxed); }
  /// Allocated bytes: the buckets, their maps' slots, the row chunks (a
  /// chunk's untouched pages are not resident yet), the free lists. Kept
  /// as they grow, so reading it costs nothing.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  /// Bounds bytes() by `cap` (0: unbounded): the table grows only while it
  /// stays within it. Past that, a new key takes the place of its bucket's
  /// least recently updated row, or, where the bucket holds none older, is
  /// not admitted; both are counted. evict() frees rows in bulk before it
  /// comes to that (at_cap).
  void set_byte_cap(size_t cap) { byte_cap_ = cap; }
  /// Whether the next chunk of a large bucket would pass the cap.
  bool at_cap() const;
  /// Rows replaced by new keys, and keys refused, to stay within the cap.
  uint64_t cap_replaced() const { return cap_replaced_; }
  uint64_t cap_refused() const { return cap_refused_; }

  /// Removes the rows the rules name at table version `step`, and under a
  /// byte cap that the table has reached, the least recently updated tenth
  /// (unless a twentieth of its rows are free already); how many.
  size_t evict(const eviction_rules& rules, int64_t step);

  /// f(key, payload, counters) for every row of `bucket`, under its lock.
  void visit(uint32_t bucket,
             const std::function<void(int64_t, const float*, row_counters)>& f) const;
  /// Sets a row from a checkpoint (value and slots, payload_floats()).
  /// Under the byte cap a row older than every row of its full bucket is
  /// not restored (counted as refused).
  void restore(int64_t key, const float* payload, row_counters counters);

  /// Keeps the rows as they are now readable (read_frozen) while updates go
  /// on: each bucket's keys are recorded under its lock, and from then on a
  /// row about to change or leave is first copied aside (copy-on-write), so
  /// a checkpoint costs the rows that change while it is read, not a second
  /// table. Appends the keys, bucket by bucket, to `keys` and each bucket's
  /// count to `bucket_rows`; returns the view's generation. A new freeze
  /// ends the view before it.
  uint64_t freeze(std::vector<int64_t>& keys, std::vector<uint32_t>& bucket_rows);
  /// Words [from, from + words) of the rows of `n` keys of view `generation`
  /// (a row's words: its payload, then frequency and last update) as they
  /// were frozen, into out[n * words]. Throws troupe_error when the view
  /// ended (thawed or replaced) or a key was not in it.
  void read_frozen(uint64_t generation, const int64_t* keys, size_t n, uint32_t from,
                   uint32_t words, void* out) const;
  /// Ends view `generation` (nothing if another replaced it) and frees the
  /// rows copied for it.
  void thaw(uint64_t generation);
  /// Rows copied aside for the current view.
  size_t frozen_copies() const;

private:
  struct bucket;
  bucket& bucket_of(int64_t key) const;
  template <class F>
  void each_under_shared_lock(const uint32_t* bucket_indices, size_t n, F&& f) const;
  float* row_at(const bucket& b, uint32_t row) const;
  /// One key's update in `b`, under its exclusive lock (h: the key's hash;
  /// row: its row, row_map::no_row for a key not yet in the table).
  void apply_row(bucket& b, int64_t key, uint64_t h, uint32_t row, uint32_t count,
                 const float* grad, int64_t step);
  /// A row for a key not in `b`, entered in its map; the caller fills it.
  /// Under the byte cap it may be the place of the bucket's least recently
  /// updated row (updated before `last_update`), or none (row_map::no_row).
  uint32_t new_row(bucket& b, int64_t key, uint64_t h, uint32_t last_update);
  /// Bytes a row past `b`'s rows handed out so far adds: its chunk, and the
  /// room the chunk list and the free list keep for it.
  size_t fresh_row_bytes(const bucket& b) const;
  /// The row of `b`'s least recently updated key, now `key`'s; none where
  /// that key was updated at `last_update` or later.
  uint32_t replace_oldest(bucket& b, int64_t key, uint64_t h, uint32_t last_update);
  size_t evict_from(bucket& b, const std::function<bool(const float*, row_counters)>& doomed);
  /// Before `row` of `key` changes or leaves: copies it aside if a frozen
  /// view still needs it as it is. Under the bucket's exclusive lock.
  void keep_frozen(bucket& b, int64_t key, const float* row);

  embedding_table_config config_;
  uint64_t id_;
  uint32_t payload_;
  uint32_t stride_;                  ///< payload + the two counters, in 4-byte words
  std::vector<float> initial_slots_; ///< a new row's slots
  std::vector<std::unique_ptr<bucket>> buckets_;
  std::atomic<uint64_t> generations_{0};
  // Written by the one thread that changes the table; bytes_ read by any.
  std::atomic<size_t> bytes_{0};
  std::atomic<size_t> rows_{0};
  size_t byte_cap_ = 0;
  size_t free_rows_ = 0; ///< in every bucket's free list
  uint64_t cap_replaced_ = 0, cap_refused_ = 0;
};

} // namespace troupe
