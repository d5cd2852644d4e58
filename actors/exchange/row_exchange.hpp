#pragma once
// A step's embedding rows with the shards: the batch's distinct keys split
// by the shard that owns them (a hash table's by bucket, a fixed-size
// table's by TF's partition; sorted by bucket within a shard, so
// that the shard takes each bucket's lock once), pulled from all shards at
// once and scattered back into the batch's rows; the rows' summed gradients
// pushed the same way, each with its key's occurrences. Through the
// caller's shard_exchange: on the bulk path to the shards with a link, over
// BASP (replies through the caller's mailbox) to the others. The exchange
// must be idle: a worker moves its rows between its dense pull and push.
// Free of CAF.
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
  /// What all parts came back with: the first refusal and the first loss.
  struct outcome {
    maybe_failure refused;
    std::optional<std::string> lost;
  };
  using finished = std::function<void(const outcome&)>;

  /// Table `table` of `dim` floats per row, its keys placed as `placement`
  /// says over `shards`. `exchange` must outlive this.
  row_exchange(shard_exchange& exchange, embedding_table_config placement, int32_t shards,
               int32_t table, uint32_t dim);

  /// Pulls the rows of rows.keys into rows.values. `rows` must live until
  /// `done` runs.
  void pull(uint64_t run, batch_rows& rows, finished done);
  /// Pushes rows.grads for rows.keys, as `header`'s step. every_shard: a
  /// shard that owns none of the keys gets an empty push (sync mode, where
  /// a step waits for every worker's rows on every shard).
  void push(const push_header& header, const batch_rows& rows, bool every_shard, finished done);
  /// Replies still due are ignored from now on (a lost peer, a new plan).
  void cancel() noexcept { ++epoch_; }

private:
  void split(const unique_keys& keys);
  /// A part per shard (every_shard) or per shard that owns keys, with
  /// those keys' bits.
  std::vector<exchange_part> parts(const unique_keys& keys, bool every_shard);

  shard_exchange& exchange_;
  embedding_table_config placement_;
  int32_t shards_;
  int32_t table_;
  uint32_t dim_;
  std::vector<std::vector<uint32_t>> parts_; // per shard: indices into the distinct keys
  std::vector<uint32_t> buckets_of_keys_;    // split's scratch, reused from step to step
  std::vector<std::vector<tensor>> storage_; // per shard: a bulk pull's rows, reused
  uint64_t epoch_ = 0;
};

} // namespace troupe
