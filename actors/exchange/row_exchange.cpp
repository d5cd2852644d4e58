#include "actors/exchange/row_exchange.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

namespace troupe {

namespace {

// The join of one pull's or push's parts: the first refusal and loss kept,
// `done` run once the last part is in (unless cancelled meanwhile).
struct parts_join {
  size_t remaining = 0;
  row_exchange::outcome result;
  row_exchange::finished done;

  void arrive(const maybe_failure& refused, const std::optional<std::string>& lost) {
    if (refused && !result.refused)
      result.refused = refused;
    if (lost && !result.lost)
      result.lost = lost;
    if (--remaining == 0)
      done(result);
  }
};

} // namespace

row_exchange::row_exchange(message_path& path, embedding_table_config placement, int32_t shards,
                           int32_t table, uint32_t dim)
  : path_(path), placement_(std::move(placement)), shards_(shards), table_(table), dim_(dim),
    parts_(static_cast<size_t>(shards)) {
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

void row_exchange::pull(uint64_t run, batch_rows& rows, finished done) {
  split(rows.keys);
  rows.values.assign(rows.keys.size() * dim_, 0.0f);
  auto join = std::make_shared<parts_join>();
  join->done = std::move(done);
  for (auto& part : parts_)
    join->remaining += part.empty() ? 0 : 1;
  if (join->remaining == 0) {
    join->done({});
    return;
  }
  auto& keys = rows.keys.keys();
  for (int32_t s = 0; s < shards_; ++s) {
    auto& part = parts_[static_cast<size_t>(s)];
    if (part.empty())
      continue;
    std::vector<int64_t> asked(part.size());
    for (size_t i = 0; i < part.size(); ++i)
      asked[i] = keys[part[i]];
    path_.pull_rows(s, run, table_, std::move(asked),
                    [this, join, s, &rows, epoch = epoch_](std::vector<tensor>& values,
                                                           const maybe_failure& refused,
                                                           const std::optional<std::string>& lost) {
                      if (epoch != epoch_)
                        return;
                      auto& part = parts_[static_cast<size_t>(s)];
                      if (!refused && !lost) {
                        if (values.size() != 1 || values[0].rank() != 2
                            || values[0].dim(0) != static_cast<int64_t>(part.size())
                            || values[0].dim(1) != static_cast<int64_t>(dim_)) {
                          join->arrive(failure{errc::shape_mismatch,
                                               "ps:" + std::to_string(s) + " answered a pull of "
                                                 + std::to_string(part.size())
                                                 + " rows with another shape"},
                                       std::nullopt);
                          return;
                        }
                        const float* in = values[0].data();
                        for (size_t i = 0; i < part.size(); ++i)
                          std::memcpy(rows.values.data() + size_t{part[i]} * dim_, in + i * dim_,
                                      dim_ * sizeof(float));
                      }
                      join->arrive(refused, lost);
                    });
  }
}

void row_exchange::push(const push_header& header, const batch_rows& rows, bool every_shard,
                        finished done) {
  auto join = std::make_shared<parts_join>();
  join->done = std::move(done);
  for (auto& part : parts_)
    join->remaining += part.empty() && !every_shard ? 0 : 1;
  if (join->remaining == 0) {
    join->done({});
    return;
  }
  auto& keys = rows.keys.keys();
  auto& counts = rows.keys.counts();
  for (int32_t s = 0; s < shards_; ++s) {
    auto& part = parts_[static_cast<size_t>(s)];
    if (part.empty() && !every_shard)
      continue;
    std::vector<int64_t> k(part.size());
    std::vector<uint32_t> c(part.size());
    tensor grads({static_cast<int64_t>(part.size()), static_cast<int64_t>(dim_)});
    for (size_t i = 0; i < part.size(); ++i) {
      k[i] = keys[part[i]];
      c[i] = counts[part[i]];
      std::memcpy(grads.data() + i * dim_, rows.grads.data() + size_t{part[i]} * dim_,
                  dim_ * sizeof(float));
    }
    path_.push_rows(s, header, table_, std::move(k), std::move(c), std::move(grads),
                    [this, join, epoch = epoch_](const maybe_failure& refused,
                                                 const std::optional<std::string>& lost) {
                      if (epoch == epoch_)
                        join->arrive(refused, lost);
                    });
  }
}

} // namespace troupe
