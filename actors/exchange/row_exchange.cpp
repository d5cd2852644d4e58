#include "actors/exchange/row_exchange.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

namespace {

// The first refusal and the first loss of an exchange's parts.
row_exchange::outcome first_of(const std::vector<part_outcome>& outcomes) {
  row_exchange::outcome result;
  for (auto& o : outcomes) {
    if (o.refused && !result.refused)
      result.refused = o.refused;
    if (o.lost && !result.lost)
      result.lost = o.lost;
  }
  return result;
}

} // namespace

row_exchange::row_exchange(shard_exchange& exchange, embedding_table_config placement,
                           int32_t shards, int32_t table, uint32_t dim)
  : exchange_(exchange), placement_(std::move(placement)), shards_(shards), table_(table),
    dim_(dim), parts_(static_cast<size_t>(shards)), storage_(static_cast<size_t>(shards)) {
}

void row_exchange::split(const unique_keys& keys) {
  for (auto& part : parts_)
    part.clear();
  auto& k = keys.keys();
  auto& bucket = buckets_of_keys_;
  bucket.resize(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    bucket[i] = placement_.buckets.bucket_of(k[i]);
    parts_[placement_.shard_of(k[i], static_cast<uint32_t>(shards_))].push_back(
      static_cast<uint32_t>(i));
  }
  for (auto& part : parts_)
    std::sort(part.begin(), part.end(),
              [&](uint32_t a, uint32_t b) { return bucket[a] < bucket[b]; });
}

std::vector<exchange_part> row_exchange::parts(const unique_keys& keys, bool every_shard) {
  std::vector<exchange_part> out;
  auto& k = keys.keys();
  for (int32_t s = 0; s < shards_; ++s) {
    auto& part = parts_[static_cast<size_t>(s)];
    if (part.empty() && !every_shard)
      continue;
    exchange_part p;
    p.shard = s;
    p.table = table_;
    p.keys = tensor({static_cast<int64_t>(part.size()), 2});
    for (size_t i = 0; i < part.size(); ++i)
      std::memcpy(p.keys.data() + 2 * i, &k[part[i]], sizeof(int64_t)); // bits, not values
    out.push_back(std::move(p));
  }
  return out;
}

void row_exchange::pull(uint64_t run, batch_rows& rows, finished done) {
  split(rows.keys);
  rows.values.assign(rows.keys.size() * dim_, 0.0f);
  auto asked = parts(rows.keys, false);
  if (asked.empty()) {
    done({});
    return;
  }
  for (auto& p : asked)
    p.storage = std::move(storage_[static_cast<size_t>(p.shard)]);
  std::vector<int32_t> shards;
  for (auto& p : asked)
    shards.push_back(p.shard);
  push_header header;
  header.run = run;
  exchange_.start(exchange_kind::pull_rows, header, std::move(asked), false);
  exchange_.finish([this, shards, &rows, done = std::move(done),
                    epoch = epoch_](std::vector<part_outcome>& outcomes) {
    if (epoch != epoch_)
      return;
    auto result = first_of(outcomes);
    for (size_t o = 0; o < outcomes.size(); ++o) {
      if (outcomes[o].refused || outcomes[o].lost)
        continue;
      auto s = shards[o];
      auto& part = parts_[static_cast<size_t>(s)];
      auto& values = outcomes[o].values;
      if (values.size() != 1 || values[0].rank() != 2
          || values[0].dim(0) != static_cast<int64_t>(part.size())
          || values[0].dim(1) != static_cast<int64_t>(dim_)) {
        if (!result.refused)
          result.refused = failure{errc::shape_mismatch,
                                   "ps:" + std::to_string(s) + " answered a pull of "
                                     + std::to_string(part.size()) + " rows with another shape"};
        continue;
      }
      const float* in = values[0].data();
      for (size_t i = 0; i < part.size(); ++i)
        std::memcpy(rows.values.data() + size_t{part[i]} * dim_, in + i * dim_,
                    dim_ * sizeof(float));
      storage_[static_cast<size_t>(s)] = std::move(values);
    }
    done(result);
  });
}

void row_exchange::push(const push_header& header, const batch_rows& rows, bool every_shard,
                        finished done) {
  auto pushed = parts(rows.keys, every_shard);
  if (pushed.empty()) {
    done({});
    return;
  }
  auto& counts = rows.keys.counts();
  for (auto& p : pushed) {
    auto& part = parts_[static_cast<size_t>(p.shard)];
    p.counts = tensor({static_cast<int64_t>(part.size())});
    tensor grads({static_cast<int64_t>(part.size()), static_cast<int64_t>(dim_)});
    for (size_t i = 0; i < part.size(); ++i) {
      std::memcpy(p.counts.data() + i, &counts[part[i]], sizeof(uint32_t));
      std::memcpy(grads.data() + i * dim_, rows.grads.data() + size_t{part[i]} * dim_,
                  dim_ * sizeof(float));
    }
    p.gradients.push_back(std::move(grads));
  }
  exchange_.start(exchange_kind::push_rows, header, std::move(pushed), false);
  exchange_.finish(
    [this, done = std::move(done), epoch = epoch_](std::vector<part_outcome>& outcomes) {
      if (epoch == epoch_)
        done(first_of(outcomes));
    });
}

} // namespace troupe
