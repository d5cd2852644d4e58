#pragma once
// A shard's part of the run's embedding tables, without CAF: the buckets it
// owns of each table, the checks on every pull and push (table, sizes, keys
// it owns, finite gradients), admission, eviction, and sync mode's per-step
// row sums. The shard's service answers pulls and pushes through it, as it
// does for dense variables through variable_store; which pushes count is
// its update_rule's.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/metrics/task_metrics.hpp"
#include "actors/protocol/messages.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/sparse/table_setup.hpp"

namespace troupe {

/// One table's figures on one shard, for the run's report and TensorBoard.
struct table_figures {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  uint64_t admitted = 0;     ///< rows created
  uint64_t evicted = 0;      ///< rows removed (eviction rules, memory cap)
  uint64_t not_admitted = 0; ///< pushed occurrences dropped before admission
  uint64_t pulled_keys = 0;
  uint64_t pushed_keys = 0;
  /// The most frequently pushed keys with their frequency, hottest first.
  std::vector<std::pair<int64_t, uint32_t>> hottest;
};

class table_store {
public:
  /// Holds `setups` (checked), this being shard `shard` of `shards`. sync:
  /// a step's rows are summed (add) and applied together (apply_step);
  /// `first_step` is the step training starts at.
  maybe_failure configure(const std::vector<table_setup>& setups, int32_t shard, int32_t shards,
                          bool sync, int64_t first_step);
  /// Forgets every table (a new run).
  void reset();

  size_t size() const noexcept { return tables_.size(); }
  bool empty() const noexcept { return tables_.empty(); }
  const std::string& name(size_t table) const { return tables_.at(table).setup.table.name; }
  /// Keys one request may name: what every peer's wire limits allow for.
  int64_t max_keys(size_t table) const { return tables_.at(table).setup.max_keys; }

  /// The values of `keys` in table `table` into `out` [keys, dim]; an unseen
  /// key reads its initial value. Refuses a key another shard owns. Safe on
  /// any thread (a bulk connection's) while the shard's own applies pushes,
  /// evicts and restores: rows change under their buckets' locks, and the
  /// tables themselves only in configure and reset, which wait for it.
  maybe_failure lookup(int32_t table, const std::vector<int64_t>& keys, tensor& out);

  /// Whether a push's rows of one table may be taken: the table, the key
  /// count, keys this shard owns and no key twice, counts and gradients
  /// that fit, finite gradients. apply and add take only checked rows.
  maybe_failure check(const step_rows& rows) const;
  /// Async: applies checked rows now (admission, the sparse optimizer, then
  /// eviction every evict_interval versions).
  void apply(const step_rows& rows);
  /// Sync: adds checked rows to the step's sums.
  void add(const step_rows& rows);
  /// Sync: applies the step's rows, each table's reduced by its
  /// sync_reduction over the `contributors` (workers) of the step.
  void apply_step(int32_t contributors);

  table_figures figures(size_t table, size_t hottest) const;
  const embedding_table& table(size_t table) const { return *tables_.at(table).rows; }
  embedding_table& table(size_t table) { return *tables_.at(table).rows; }
  /// Sets rows from a checkpoint: keys (each this shard's), their
  /// frequencies and last updates, and payloads [keys, value + slots].
  maybe_failure restore(int32_t table, const std::vector<int64_t>& keys,
                        const std::vector<uint32_t>& frequencies,
                        const std::vector<uint32_t>& last_updates, const tensor& payloads);
  /// Rows and bytes of every table together.
  uint64_t rows() const;
  uint64_t bytes() const;

private:
  struct held {
    table_setup setup;
    std::unique_ptr<embedding_table> rows;
    int64_t version = 0;                           // pushes applied (async) or steps (sync)
    std::unordered_map<int64_t, uint32_t> pending; // occurrences of keys not admitted yet
    std::optional<row_accumulator> sums;           // sync: this step's rows
    table_figures counts;
    std::optional<metrics::table_metrics> metrics; // the process's view of this table here
    uint64_t published_admitted = 0, published_evicted = 0;
  };
  /// The table's rows, bytes, admissions and evictions into the metrics.
  static void publish(held& t);
  maybe_failure check_request(int32_t table, const std::vector<int64_t>& keys) const;
  void apply_rows(held& t, const int64_t* keys, const uint32_t* counts, const float* grads,
                  size_t n);
  bool admitted(held& t, int64_t key, uint32_t count);

  // configure and reset hold it exclusively, lookups shared: every other
  // member function runs on the shard's own thread, the only writer.
  mutable std::shared_mutex structure_;
  mutable std::mutex pulled_; // the tables' counts.pulled_keys, counted by lookups on any thread
  std::vector<held> tables_;
  int32_t shard_ = 0, shards_ = 1;
  std::vector<int64_t> kept_keys_;
  std::vector<uint32_t> kept_counts_;
  std::vector<float> kept_grads_;
};

} // namespace troupe
