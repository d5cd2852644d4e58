#include "tensor/sparse/embedding_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "tensor/core/flush_denormals.hpp"
#include "tensor/sparse/frozen_rows.hpp"
#include "tensor/sparse/lookup_batch.hpp"
#include "tensor/sparse/prefetch.hpp"
#include "tensor/sparse/row_layout.hpp"

namespace troupe {

maybe_failure embedding_table_config::check() const {
  if (name.empty())
    return failure{errc::invalid_setting, "an embedding table needs a name"};
  if (dim == 0 || dim > 4096)
    return failure{errc::invalid_setting, "embedding table " + name + ": dim = "
                                            + std::to_string(dim) + " must be in [1, 4096]"};
  if (!(init.scale >= 0) || !std::isfinite(init.scale))
    return failure{errc::invalid_setting, "embedding table " + name + ": init scale must be >= 0"};
  if (auto bad = buckets.check())
    return bad;
  if (kind == table_kind::fixed && (rows < 1 || rows > max_plain_id + 1))
    return failure{errc::invalid_setting, "embedding table " + name + ": a fixed-size table of "
                                            + std::to_string(rows)
                                            + " rows; it needs 1 to 2^48 (embedding.vocabulary)"};
  return optimizer.check();
}

using row_layout::chunk_of;
using row_layout::chunk_rows;
using row_layout::chunk_start;
using row_layout::counters_of;
using row_layout::max_chunk_rows;
using row_layout::set_counters;

struct embedding_table::bucket {
  explicit bucket(uint64_t seed) : map(seed) {}
  std::unique_ptr<frozen_rows> frozen;
  uint64_t newest = 0; ///< no row's last update is later (a freeze reads no row)
  row_map map;
  std::vector<std::unique_ptr<float[]>> chunks;
  std::vector<uint32_t> free_rows;
  uint32_t used = 0; ///< rows handed out so far (high-water mark)
  mutable std::shared_mutex lock;
};

embedding_table::embedding_table(embedding_table_config config) : config_(std::move(config)) {
  if (auto bad = config_.check())
    throw troupe_error(bad->message);
  id_ = hash_bytes(config_.name);
  payload_ = config_.dim * (1 + slot_count(config_.optimizer.kind));
  stride_ = payload_ + 2;
  for (uint32_t s = 0; s < slot_count(config_.optimizer.kind); ++s)
    initial_slots_.insert(initial_slots_.end(), config_.dim,
                          slot_initial_value(config_.optimizer, s));
  buckets_.reserve(config_.buckets.count);
  for (uint32_t b = 0; b < config_.buckets.count; ++b)
    buckets_.push_back(std::make_unique<bucket>(config_.buckets.seed ^ 0x2545f4914f6cdd1dULL));
  bytes_ = buckets_.capacity() * sizeof(void*) + buckets_.size() * sizeof(bucket);
}

embedding_table::~embedding_table() = default;

embedding_table::bucket& embedding_table::bucket_of(int64_t key) const {
  return *buckets_[config_.buckets.bucket_of(key)];
}

float* embedding_table::row_at(const bucket& b, uint32_t row) const {
  uint32_t chunk = chunk_of(row);
  return b.chunks[chunk].get() + size_t{row - chunk_start(chunk)} * stride_;
}

template <class F>
void embedding_table::each_under_shared_lock(const uint32_t* bucket_indices, size_t n,
                                             F&& f) const {
  // One lock at a time (the old one released first), so that a pull and a
  // push never wait on each other's next bucket; consecutive keys of one
  // bucket share the lock (workers send keys sorted by bucket).
  uint32_t held = UINT32_MAX;
  std::shared_lock<std::shared_mutex> guard;
  for (size_t i = 0; i < n; ++i) {
    const bucket& b = *buckets_[bucket_indices[i]];
    if (bucket_indices[i] != held) {
      if (held != UINT32_MAX)
        guard.unlock();
      guard = std::shared_lock<std::shared_mutex>(b.lock);
      held = bucket_indices[i];
    }
    f(i, b);
  }
}

void embedding_table::lookup(const int64_t* keys, size_t n, float* out) const {
  // In groups: the map slots, then the rows, of a whole group are fetched
  // before any is read, so that their cache misses overlap (64 keys: 10.4-
  // 10.8 M lookups/s over 10^7 rows, 9.5-10.7 with 16). Each pass looks the
  // key up again under its lock: the row may have been evicted (and reused)
  // in between.
  constexpr size_t group = 64;
  uint32_t indices[group];
  uint64_t hashes[group];
  for (size_t first = 0; first < n; first += group) {
    size_t m = std::min(group, n - first);
    const int64_t* k = keys + first;
    for (size_t i = 0; i < m; ++i) {
      indices[i] = config_.buckets.bucket_of(k[i]);
      hashes[i] = buckets_[indices[i]]->map.hash(k[i]);
    }
    each_under_shared_lock(indices, m,
                           [&](size_t i, const bucket& b) { b.map.prefetch(hashes[i]); });
    each_under_shared_lock(indices, m, [&](size_t i, const bucket& b) {
      uint32_t row = b.map.find(k[i], hashes[i]);
      if (row != row_map::no_row)
        prefetch_lines(row_at(b, row), config_.dim * sizeof(float));
    });
    each_under_shared_lock(indices, m, [&](size_t i, const bucket& b) {
      float* dest = out + (first + i) * config_.dim;
      uint32_t row = b.map.find(k[i], hashes[i]);
      if (row == row_map::no_row)
        initial_row(config_.init, id_, k[i], dest, config_.dim);
      else
        std::memcpy(dest, row_at(b, row), config_.dim * sizeof(float));
    });
  }
}

maybe_failure embedding_table::check_push(const int64_t* keys, const float* grads, size_t n) const {
  for (size_t i = 0; i < n * config_.dim; ++i)
    if (!std::isfinite(grads[i]))
      return failure{errc::non_finite_gradient,
                     "a push to embedding table " + config_.name + " holds NaN or infinity"};
  for (size_t i = 0; i < n; ++i)
    if (keys[i] < 0)
      return failure{errc::invalid_request, "a push to embedding table " + config_.name
                                              + " names the negative key "
                                              + std::to_string(keys[i])};
  unique_keys distinct;
  distinct.assign(keys, n);
  if (distinct.size() != n) {
    auto twice = std::find_if(distinct.counts().begin(), distinct.counts().end(),
                              [](uint32_t count) { return count > 1; });
    return failure{errc::invalid_request,
                   "a push to embedding table " + config_.name + " names key "
                     + std::to_string(distinct.keys()[twice - distinct.counts().begin()])
                     + " twice: workers sum a key's gradients first"};
  }
  return std::nullopt;
}

void embedding_table::apply_row(bucket& b, int64_t key, uint64_t h, uint32_t row, uint32_t count,
                                const float* grad, int64_t step) {
  float* dest;
  row_counters c;
  if (row == row_map::no_row) {
    row = new_row(b, key, h, static_cast<uint32_t>(step));
    if (row == row_map::no_row)
      return; // no room under the byte cap: counted there
    // The row starts where a pull of the unseen key read it.
    dest = row_at(b, row);
    initial_row(config_.init, id_, key, dest, config_.dim);
    std::copy(initial_slots_.begin(), initial_slots_.end(), dest + config_.dim);
  } else {
    dest = row_at(b, row);
    keep_frozen(b, key, dest);
    c = counters_of(dest, payload_);
  }
  apply_sparse_row(config_.optimizer, dest, dest + config_.dim, grad, config_.dim, step);
  c.frequency += count;
  c.last_update = static_cast<uint32_t>(step);
  set_counters(dest, payload_, c);
  b.newest = std::max<uint64_t>(b.newest, c.last_update);
}

size_t embedding_table::fresh_row_bytes(const bucket& b) const {
  size_t out = 0;
  uint32_t chunk = chunk_of(b.used);
  if (chunk == b.chunks.size()) {
    out += size_t{chunk_rows(chunk)} * stride_ * sizeof(float);
    if (b.chunks.size() == b.chunks.capacity())
      out += std::max<size_t>(4, b.chunks.capacity()) * sizeof(void*);
  }
  if (b.used == b.free_rows.capacity())
    out += std::max<size_t>(16, b.free_rows.capacity()) * sizeof(uint32_t);
  return out;
}

uint32_t embedding_table::new_row(bucket& b, int64_t key, uint64_t h, uint32_t last_update) {
  size_t growth = b.map.growth_bytes() + (b.free_rows.empty() ? fresh_row_bytes(b) : 0);
  if (byte_cap_ > 0 && bytes() + growth > byte_cap_)
    return replace_oldest(b, key, h, last_update);
  uint32_t row;
  if (!b.free_rows.empty()) {
    row = b.free_rows.back();
    b.free_rows.pop_back();
    --free_rows_;
  } else {
    // The chunk list and the free list keep room ahead (reserved here, and
    // counted), so that neither grows where the cap does not look: an
    // eviction fills the free list up to the rows handed out.
    row = b.used++;
    uint32_t chunk = chunk_of(row);
    if (chunk == b.chunks.size()) {
      if (b.chunks.size() == b.chunks.capacity())
        b.chunks.reserve(b.chunks.capacity() + std::max<size_t>(4, b.chunks.capacity()));
      b.chunks.emplace_back(new float[size_t{chunk_rows(chunk)} * stride_]);
    }
    if (b.used > b.free_rows.capacity())
      b.free_rows.reserve(b.free_rows.capacity() + std::max<size_t>(16, b.free_rows.capacity()));
  }
  b.map.insert(key, h, row);
  bytes_.fetch_add(growth, std::memory_order_relaxed);
  rows_.fetch_add(1, std::memory_order_relaxed);
  return row;
}

uint32_t embedding_table::replace_oldest(bucket& b, int64_t key, uint64_t h, uint32_t last_update) {
  int64_t oldest = 0;
  uint32_t row = row_map::no_row;
  uint32_t age = UINT32_MAX;
  b.map.for_each([&](int64_t k, uint32_t r) {
    auto updated = counters_of(row_at(b, r), payload_).last_update;
    if (updated < age || row == row_map::no_row) {
      age = updated;
      oldest = k;
      row = r;
    }
  });
  if (row == row_map::no_row || age >= last_update) {
    ++cap_refused_;
    return row_map::no_row;
  }
  keep_frozen(b, oldest, row_at(b, row));
  b.map.erase(oldest, b.map.hash(oldest));
  b.map.insert(key, h, row); // the slot just freed: no growth
  ++cap_replaced_;
  return row;
}

bool embedding_table::at_cap() const {
  return byte_cap_ > 0 && bytes() + size_t{max_chunk_rows} * stride_ * sizeof(float) > byte_cap_;
}

maybe_failure embedding_table::apply(const int64_t* keys, const uint32_t* counts,
                                     const float* grads, size_t n, int64_t step) {
  if (auto bad = check_push(keys, grads, n))
    return bad;
  apply_checked(keys, counts, grads, n, step);
  return std::nullopt;
}

void embedding_table::apply_checked(const int64_t* keys, const uint32_t* counts, const float* grads,
                                    size_t n, int64_t step) {
  flush_denormals arithmetic;
  // In groups, as lookup does: the map slots of a whole group are fetched,
  // then its rows, before any is changed, so that their cache misses
  // overlap (a push's keys may come in any order of buckets). Changes come
  // from one thread, so this one reads the maps and chunks for the
  // prefetch without a lock: readers never change them.
  constexpr size_t group = 16;
  bucket* owners[group];
  uint64_t hashes[group];
  uint32_t rows[group];
  bucket* held = nullptr;
  std::unique_lock<std::shared_mutex> guard;
  for (size_t first = 0; first < n; first += group) {
    size_t m = std::min(group, n - first);
    for (size_t j = 0; j < m; ++j) {
      owners[j] = &bucket_of(keys[first + j]);
      hashes[j] = owners[j]->map.hash(keys[first + j]);
      owners[j]->map.prefetch(hashes[j]);
    }
    // A row found here stays the key's through the group: a push names a
    // key once, and new rows never take one in use.
    for (size_t j = 0; j < m; ++j) {
      rows[j] = owners[j]->map.find(keys[first + j], hashes[j]);
      if (rows[j] != row_map::no_row)
        prefetch_lines(row_at(*owners[j], rows[j]), stride_ * sizeof(float));
    }
    for (size_t j = 0; j < m; ++j) {
      bucket& b = *owners[j];
      if (&b != held) {
        if (held)
          guard.unlock();
        guard = std::unique_lock<std::shared_mutex>(b.lock);
        held = &b;
      }
      apply_row(b, keys[first + j], hashes[j], rows[j], counts[first + j],
                grads + (first + j) * config_.dim, step);
    }
  }
}

size_t embedding_table::evict_from(bucket& b,
                                   const std::function<bool(const float*, row_counters)>& doomed) {
  std::vector<int64_t> keys;
  b.map.for_each([&](int64_t key, uint32_t row) {
    const float* r = row_at(b, row);
    if (doomed(r, counters_of(r, payload_)))
      keys.push_back(key);
  });
  for (int64_t key : keys) {
    uint64_t h = b.map.hash(key);
    uint32_t row = b.map.find(key, h);
    keep_frozen(b, key, row_at(b, row));
    b.free_rows.push_back(row); // within the room new_row reserved
    b.map.erase(key, h);
  }
  free_rows_ += keys.size();
  rows_.fetch_sub(keys.size(), std::memory_order_relaxed);
  return keys.size();
}

size_t embedding_table::evict(const eviction_rules& rules, int64_t step) {
  size_t evicted = 0;
  uint32_t dim = config_.dim;
  auto rule = [&](const float* row, row_counters c) {
    if (rules.after_steps > 0 && step - int64_t{c.last_update} >= rules.after_steps)
      return true;
    if (rules.l2_below > 0) {
      double norm = 0;
      for (uint32_t j = 0; j < dim; ++j)
        norm += double{row[j]} * row[j];
      return std::sqrt(norm) < rules.l2_below;
    }
    return false;
  };
  if (rules.after_steps > 0 || rules.l2_below > 0)
    for (auto& b : buckets_) {
      std::unique_lock guard(b->lock);
      evicted += evict_from(*b, rule);
    }
  // At the byte cap the table no longer grows (new_row): evicted rows'
  // storage is what new keys take. The least recently updated tenth goes
  // at once, so that new keys find room in their buckets instead of each
  // replacing one row.
  size_t held = rows();
  if (!at_cap() || free_rows_ * 20 >= held || held == 0)
    return evicted;
  size_t keep = held * 9 / 10;
  std::vector<uint32_t> ages;
  for (auto& b : buckets_) {
    std::shared_lock guard(b->lock);
    b->map.for_each([&](int64_t, uint32_t row) {
      ages.push_back(counters_of(row_at(*b, row), payload_).last_update);
    });
  }
  size_t drop = ages.size() - keep;
  auto cut = ages.begin() + static_cast<std::ptrdiff_t>(drop);
  std::nth_element(ages.begin(), cut, ages.end());
  uint32_t oldest_kept = *cut;
  // Rows as old as the cut go too, until `drop` rows went.
  size_t ties = drop - static_cast<size_t>(std::count_if(ages.begin(), ages.end(), [&](uint32_t a) {
                  return a < oldest_kept;
                }));
  for (auto& b : buckets_) {
    std::unique_lock guard(b->lock);
    evicted += evict_from(*b, [&](const float*, row_counters c) {
      return c.last_update < oldest_kept || (c.last_update == oldest_kept && ties > 0 && ties--);
    });
  }
  return evicted;
}

void embedding_table::visit(
  uint32_t bucket_index, const std::function<void(int64_t, const float*, row_counters)>& f) const {
  const bucket& b = *buckets_.at(bucket_index);
  std::shared_lock guard(b.lock);
  b.map.for_each([&](int64_t key, uint32_t row) {
    const float* r = row_at(b, row);
    f(key, r, counters_of(r, payload_));
  });
}

bool embedding_table::contains(int64_t key) const {
  const bucket& b = bucket_of(key);
  std::shared_lock guard(b.lock);
  return b.map.find(key, b.map.hash(key)) != row_map::no_row;
}

size_t embedding_table::erase(const int64_t* keys, size_t n) {
  size_t erased = 0;
  for (size_t i = 0; i < n; ++i) {
    bucket& b = bucket_of(keys[i]);
    std::unique_lock guard(b.lock);
    uint64_t h = b.map.hash(keys[i]);
    uint32_t row = b.map.find(keys[i], h);
    if (row == row_map::no_row)
      continue;
    keep_frozen(b, keys[i], row_at(b, row));
    b.free_rows.push_back(row);
    b.map.erase(keys[i], h);
    ++erased;
  }
  free_rows_ += erased;
  rows_.fetch_sub(erased, std::memory_order_relaxed);
  return erased;
}

void embedding_table::restore(int64_t key, const float* payload, row_counters counters) {
  bucket& b = bucket_of(key);
  std::unique_lock guard(b.lock);
  uint64_t h = b.map.hash(key);
  uint32_t row = b.map.find(key, h);
  if (row != row_map::no_row)
    keep_frozen(b, key, row_at(b, row));
  if (row == row_map::no_row)
    row = new_row(b, key, h, counters.last_update);
  if (row == row_map::no_row)
    return; // under the byte cap, older than every row of its bucket
  float* dest = row_at(b, row);
  std::memcpy(dest, payload, payload_ * sizeof(float));
  set_counters(dest, payload_, counters);
  b.newest = std::max<uint64_t>(b.newest, counters.last_update);
}

void embedding_table::keep_frozen(bucket& b, int64_t key, const float* row) {
  if (b.frozen)
    b.frozen->keep(key, row);
}

uint64_t embedding_table::freeze(std::vector<int64_t>& keys, std::vector<uint32_t>& bucket_rows) {
  uint64_t generation = ++generations_;
  for (auto& b : buckets_) {
    std::unique_lock guard(b->lock);
    b->frozen = std::make_unique<frozen_rows>(generation, b->newest + 1, stride_, payload_);
    size_t before = keys.size();
    b->map.for_each([&](int64_t key, uint32_t) { keys.push_back(key); });
    bucket_rows.push_back(static_cast<uint32_t>(keys.size() - before));
  }
  return generation;
}

void embedding_table::read_frozen(uint64_t generation, const int64_t* keys, size_t n, uint32_t from,
                                  uint32_t words, void* out) const {
  if (from + words > stride_)
    throw troupe_error("embedding table " + config_.name + ": a frozen read past a row's words");
  auto* dest = static_cast<char*>(out);
  const bucket* held = nullptr;
  std::shared_lock<std::shared_mutex> guard;
  for (size_t i = 0; i < n; ++i, dest += size_t{words} * sizeof(float)) {
    const bucket& b = bucket_of(keys[i]);
    if (&b != held) {
      if (held)
        guard.unlock();
      guard = std::shared_lock<std::shared_mutex>(b.lock);
      held = &b;
    }
    if (!b.frozen || b.frozen->generation() != generation)
      throw troupe_error("embedding table " + config_.name
                         + ": the checkpoint's view of the rows ended (a newer one replaced it)");
    uint32_t live = b.map.find(keys[i], b.map.hash(keys[i]));
    const float* row = b.frozen->row(keys[i], live != row_map::no_row ? row_at(b, live) : nullptr);
    if (!row)
      throw troupe_error("embedding table " + config_.name + ": key " + std::to_string(keys[i])
                         + " is not in the checkpoint's view of the rows");
    std::memcpy(dest, row + from, size_t{words} * sizeof(float));
  }
}

void embedding_table::thaw(uint64_t generation) {
  for (auto& b : buckets_) {
    std::unique_lock guard(b->lock);
    if (b->frozen && b->frozen->generation() == generation)
      b->frozen.reset();
  }
}

size_t embedding_table::frozen_copies() const {
  size_t total = 0;
  for (auto& b : buckets_) {
    std::shared_lock guard(b->lock);
    if (b->frozen)
      total += b->frozen->copies();
  }
  return total;
}

} // namespace troupe
