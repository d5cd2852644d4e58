#pragma once
// A step's embedding rows with the shards: the batch's distinct keys split
// by the shard that owns them (a hash table's by bucket, a fixed-size
// table's by TF's partition; sorted by bucket within a shard, so
// that the shard takes each bucket's lock once), asked in the parts of a
// shard_exchange (beside a step's dense values, so that one round trip
// carries both) and scattered back into the batch's rows; the rows' summed
// gradients pushed the same way, each with its key's occurrences. On the
// bulk path to the shards with a link, over BASP (replies through the
// caller's mailbox) to the others. Free of CAF.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/exchange/shard_exchange.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/sparse/embedding_table.hpp"

namespace troupe {

class row_exchange {
public:
  /// What the rows of an evaluator's pull came back with: a refusal (a
  /// misshapen answer) or the first loss.
  struct outcome {
    maybe_failure refused;
    std::optional<std::string> lost;
  };
  using finished = std::function<void(const outcome&)>;

  /// Table `table` of `dim` floats per row, its keys placed as `placement`
  /// says over `shards`. `exchange` must outlive this.
  row_exchange(shard_exchange& exchange, embedding_table_config placement, int32_t shards,
               int32_t table, uint32_t dim);

  /// The rows of rows.keys, asked in the parts of a pull: each shard's keys
  /// ride in its part (one is added for a shard that has none).
  void ask_pull(const batch_rows& rows, std::vector<exchange_part>& parts);
  /// That pull's rows into rows.values, from the outcomes of those parts
  /// (in their order, none of them lost); a shard's answer of another shape
  /// is refused.
  maybe_failure take_pull(std::vector<part_outcome>& outcomes, batch_rows& rows);
  /// rows.grads for rows.keys, asked in the parts of a push: every shard
  /// gets its part (no keys where the batch has none there), so that each
  /// shard counts every step, in either mode.
  void ask_push(const batch_rows& rows, std::vector<exchange_part>& parts);

  /// Pulls the rows of rows.keys into rows.values, alone (the evaluator)
  /// through the exchange, which must be idle. `rows` must live until
  /// `done` runs.
  void pull(uint64_t run, batch_rows& rows, finished done);
  /// Replies to pull() still due are ignored from now on (a lost peer, a new plan).
  void cancel() noexcept { ++epoch_; }

private:
  void split(const unique_keys& keys);
  /// Shard s's keys (and, pushing, their counts and gradients) into its
  /// part in `parts`, added where it has none; where each went in asked_.
  void ask(const batch_rows& rows, bool pushing, std::vector<exchange_part>& parts);

  shard_exchange& exchange_;
  embedding_table_config placement_;
  int32_t shards_;
  int32_t table_;
  uint32_t dim_;
  std::vector<std::vector<uint32_t>> parts_; // per shard: indices into the distinct keys
  std::vector<uint32_t> buckets_of_keys_;    // split's scratch, reused from step to step
  std::vector<std::vector<tensor>> storage_; // per shard: a bulk pull's rows, reused
  /// The last ask: which part carries which shard's keys, at which of its rows.
  struct asked_part {
    size_t part;
    int32_t shard;
    size_t slot;
  };
  std::vector<asked_part> asked_;
  uint64_t epoch_ = 0;
};

} // namespace troupe
