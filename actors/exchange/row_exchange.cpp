#include "actors/exchange/row_exchange.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

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

// A push goes to every shard (each counts every step), a pull only to the
// shards that own some of the batch's keys.
void row_exchange::ask(const batch_rows& rows, bool pushing, std::vector<exchange_part>& parts) {
  asked_.clear();
  auto& k = rows.keys.keys();
  auto& counts = rows.keys.counts();
  for (int32_t s = 0; s < shards_; ++s) {
    auto& mine = parts_[static_cast<size_t>(s)];
    if (mine.empty() && !pushing)
      continue;
    auto at = std::find_if(parts.begin(), parts.end(),
                           [s](const exchange_part& p) { return p.shard == s; });
    if (at == parts.end()) {
      parts.emplace_back();
      parts.back().shard = s;
      at = parts.end() - 1;
    }
    auto n = static_cast<int64_t>(mine.size());
    part_rows p;
    p.table = table_;
    p.keys = tensor({n, 2});
    for (size_t i = 0; i < mine.size(); ++i)
      std::memcpy(p.keys.data() + 2 * i, &k[mine[i]], sizeof(int64_t)); // bits, not values
    if (pushing) {
      p.counts = tensor({n});
      p.gradients = tensor({n, static_cast<int64_t>(dim_)});
      for (size_t i = 0; i < mine.size(); ++i) {
        std::memcpy(p.counts.data() + i, &counts[mine[i]], sizeof(uint32_t));
        std::memcpy(p.gradients.data() + i * dim_, rows.grads.data() + size_t{mine[i]} * dim_,
                    dim_ * sizeof(float));
      }
    } else {
      p.storage = std::move(storage_[static_cast<size_t>(s)]);
    }
    asked_.push_back({static_cast<size_t>(at - parts.begin()), s, at->rows.size()});
    at->rows.push_back(std::move(p));
  }
}

void row_exchange::ask_pull(const batch_rows& rows, std::vector<exchange_part>& parts) {
  split(rows.keys);
  ask(rows, false, parts);
}

maybe_failure row_exchange::take_pull(std::vector<part_outcome>& outcomes, batch_rows& rows) {
  rows.values.assign(rows.keys.size() * dim_, 0.0f);
  for (auto& [index, s, slot] : asked_) {
    auto& got = outcomes.at(index).rows;
    auto& mine = parts_[static_cast<size_t>(s)];
    if (slot >= got.size() || got[slot].rank() != 2
        || got[slot].dim(0) != static_cast<int64_t>(mine.size())
        || got[slot].dim(1) != static_cast<int64_t>(dim_))
      return failure{errc::shape_mismatch, "ps:" + std::to_string(s) + " answered a pull of "
                                             + std::to_string(mine.size())
                                             + " rows with another shape"};
    const float* in = got[slot].data();
    for (size_t i = 0; i < mine.size(); ++i)
      std::memcpy(rows.values.data() + size_t{mine[i]} * dim_, in + i * dim_, dim_ * sizeof(float));
    storage_[static_cast<size_t>(s)].assign(1, std::move(got[slot]));
  }
  return std::nullopt;
}

void row_exchange::ask_push(const batch_rows& rows, std::vector<exchange_part>& parts) {
  ask(rows, true, parts);
}

void row_exchange::pull(uint64_t run, batch_rows& rows, finished done) {
  std::vector<exchange_part> parts;
  ask_pull(rows, parts);
  push_header header;
  header.run = run;
  exchange_.start(exchange_kind::pull, header, std::move(parts), false);
  exchange_.finish(
    [this, &rows, done = std::move(done), epoch = epoch_](std::vector<part_outcome>& outcomes) {
      if (epoch != epoch_)
        return;
      outcome result;
      for (auto& out : outcomes)
        if (out.lost && !result.lost)
          result.lost = out.lost;
      if (!result.lost)
        result.refused = take_pull(outcomes, rows);
      done(result);
    });
}

} // namespace troupe
