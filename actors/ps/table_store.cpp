#include "actors/ps/table_store.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace troupe {

namespace {

failure refused(const std::string& what) {
  return {errc::invalid_request, what};
}

} // namespace

maybe_failure table_store::configure(const std::vector<table_setup>& setups, int32_t shard,
                                     int32_t shards, bool sync, int64_t first_step) {
  if (shards < 1 || shard < 0 || shard >= shards)
    return failure{errc::invalid_setting, "shard " + std::to_string(shard) + " of "
                                            + std::to_string(shards) + " cannot hold tables"};
  for (auto& s : setups)
    if (auto bad = s.check())
      return bad;
  std::unique_lock<std::shared_mutex> exclusive{structure_};
  tables_.clear();
  shard_ = shard;
  shards_ = shards;
  for (auto& s : setups) {
    held t;
    t.setup = s;
    t.rows = std::make_unique<embedding_table>(s.table);
    t.rows->set_byte_cap(s.eviction.max_bytes);
    t.version = first_step;
    t.metrics.emplace(metrics::table_metrics::make(s.table.name, shard));
    if (sync)
      t.sums.emplace(s.table.dim);
    tables_.push_back(std::move(t));
  }
  return std::nullopt;
}

void table_store::reset() {
  std::unique_lock<std::shared_mutex> exclusive{structure_};
  for (auto& t : tables_) {
    t.metrics->rows.set(0);
    t.metrics->bytes.set(0);
  }
  tables_.clear();
}

void table_store::publish(held& t) {
  auto& m = *t.metrics;
  m.rows.set(static_cast<double>(t.rows->rows()));
  m.bytes.set(static_cast<double>(t.rows->bytes()));
  auto evicted = t.counts.evicted + t.rows->cap_replaced();
  m.admitted.add(t.counts.admitted - t.published_admitted);
  m.evicted.add(evicted - t.published_evicted);
  t.published_admitted = t.counts.admitted;
  t.published_evicted = evicted;
}

maybe_failure table_store::check_request(int32_t table, const std::vector<int64_t>& keys) const {
  if (table < 0 || static_cast<size_t>(table) >= tables_.size())
    return refused("no embedding table " + std::to_string(table) + " (the shard holds "
                   + std::to_string(tables_.size()) + ")");
  auto& t = tables_[static_cast<size_t>(table)];
  if (static_cast<int64_t>(keys.size()) > t.setup.max_keys)
    return refused("a request for " + std::to_string(keys.size()) + " keys of table "
                   + t.setup.table.name + ", above embedding.max-keys-per-request = "
                   + std::to_string(t.setup.max_keys));
  auto& config = t.setup.table;
  auto shards = static_cast<uint32_t>(shards_);
  for (auto key : keys) {
    if (!config.holds(key))
      return refused(
        "key " + std::to_string(key) + " of table " + config.name
        + (key < 0 ? " is negative"
                   : " is past the fixed-size table's " + std::to_string(config.rows) + " rows"));
    if (config.shard_of(key, shards) != static_cast<uint32_t>(shard_))
      return refused("key " + std::to_string(key) + " of table " + config.name
                     + " belongs to ps:" + std::to_string(config.shard_of(key, shards))
                     + ", not ps:" + std::to_string(shard_));
  }
  return std::nullopt;
}

maybe_failure table_store::lookup(int32_t table, const std::vector<int64_t>& keys, tensor& out) {
  std::shared_lock<std::shared_mutex> shared{structure_};
  if (auto bad = check_request(table, keys))
    return bad;
  auto& t = tables_[static_cast<size_t>(table)];
  out = tensor({static_cast<int64_t>(keys.size()), static_cast<int64_t>(t.rows->dim())});
  t.rows->lookup(keys.data(), keys.size(), out.data());
  std::lock_guard<std::mutex> counting{pulled_};
  t.counts.pulled_keys += keys.size();
  return std::nullopt;
}

maybe_failure table_store::check(const step_rows& rows) const {
  if (auto bad = check_request(rows.table, rows.keys))
    return bad;
  auto& t = tables_[static_cast<size_t>(rows.table)];
  auto n = rows.keys.size();
  auto dim = t.rows->dim();
  if (rows.counts.size() != n)
    return refused(std::to_string(n) + " keys but " + std::to_string(rows.counts.size())
                   + " counts");
  if (rows.grads.rank() != 2 || rows.grads.dim(0) != static_cast<int64_t>(n)
      || rows.grads.dim(1) != static_cast<int64_t>(dim))
    return refused("row gradients of shape " + to_string(rows.grads.shape()) + ", expected ["
                   + std::to_string(n) + ", " + std::to_string(dim) + "]");
  return t.rows->check_push(rows.keys.data(), rows.grads.data(), n);
}

// Whether a push of `count` occurrences of `key` (no row yet) creates its row.
bool table_store::admitted(held& t, int64_t key, uint32_t count) {
  auto& rules = t.setup.admission;
  if (rules.probability < 1.0) {
    uint64_t h = mix64(static_cast<uint64_t>(key) ^ mix64(static_cast<uint64_t>(t.version) + 1));
    if (static_cast<double>(h >> 11) * 0x1.0p-53 >= rules.probability)
      return false;
  }
  if (rules.after_count <= 1)
    return true;
  if (t.pending.size() >= table_limits::max_pending_keys)
    t.pending.clear();
  auto& seen = t.pending[key];
  seen += count;
  if (seen < rules.after_count)
    return false;
  t.pending.erase(key);
  return true;
}

void table_store::apply_rows(held& t, const int64_t* keys, const uint32_t* counts,
                             const float* grads, size_t n) {
  bool filtering = t.setup.admission.after_count > 1 || t.setup.admission.probability < 1.0;
  uint32_t dim = t.rows->dim();
  if (filtering) {
    kept_keys_.clear();
    kept_counts_.clear();
    kept_grads_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (!t.rows->contains(keys[i]) && !admitted(t, keys[i], counts[i])) {
        t.counts.not_admitted += counts[i];
        continue;
      }
      kept_keys_.push_back(keys[i]);
      kept_counts_.push_back(counts[i]);
      kept_grads_.insert(kept_grads_.end(), grads + i * dim, grads + (i + 1) * dim);
    }
    keys = kept_keys_.data();
    counts = kept_counts_.data();
    grads = kept_grads_.data();
    n = kept_keys_.size();
  }
  auto rows_before = t.rows->rows();
  auto replaced_before = t.rows->cap_replaced();
  t.rows->apply_checked(keys, counts, grads, n, t.version);
  ++t.version;
  t.counts.pushed_keys += n;
  // New rows: those added, and those that took an old row's place.
  t.counts.admitted += t.rows->rows() - rows_before + t.rows->cap_replaced() - replaced_before;
  auto& rules = t.setup.eviction;
  bool due = (rules.after_steps > 0 || rules.l2_below > 0)
             && t.version % t.setup.evict_interval == 0;
  if (t.rows->at_cap() || due)
    t.counts.evicted += t.rows->evict(rules, t.version);
  publish(t);
}

void table_store::apply(const step_rows& rows) {
  auto& t = tables_[static_cast<size_t>(rows.table)];
  apply_rows(t, rows.keys.data(), rows.counts.data(), rows.grads.data(), rows.keys.size());
}

void table_store::add(const step_rows& rows) {
  auto& t = tables_[static_cast<size_t>(rows.table)];
  t.sums->add(rows.keys.data(), rows.counts.data(), rows.grads.data(), rows.keys.size());
}

void table_store::apply_step(int32_t contributors) {
  for (auto& t : tables_) {
    auto rows = t.sums->take(t.setup.reduction, static_cast<uint32_t>(contributors));
    apply_rows(t, rows.keys.data(), rows.counts.data(), rows.grads.data(), rows.keys.size());
  }
}

maybe_failure table_store::restore(int32_t table, const std::vector<int64_t>& keys,
                                   const std::vector<uint32_t>& frequencies,
                                   const std::vector<uint32_t>& last_updates,
                                   const tensor& payloads) {
  if (auto bad = check_request(table, keys))
    return bad;
  auto& t = tables_[static_cast<size_t>(table)];
  auto width = t.rows->payload_floats();
  if (frequencies.size() != keys.size() || last_updates.size() != keys.size()
      || payloads.rank() != 2 || payloads.dim(0) != static_cast<int64_t>(keys.size())
      || payloads.dim(1) != static_cast<int64_t>(width))
    return refused("restored rows of table " + t.setup.table.name + " disagree in length or width");
  if (payloads.first_non_finite() != payloads.size())
    return refused("restored rows of table " + t.setup.table.name
                   + " hold a value that is not finite");
  for (size_t i = 0; i < keys.size(); ++i)
    t.rows->restore(keys[i], payloads.data() + i * width, {frequencies[i], last_updates[i]});
  publish(t);
  return std::nullopt;
}

table_figures table_store::figures(size_t table, size_t hottest) const {
  auto& t = tables_.at(table);
  table_figures out;
  {
    std::lock_guard<std::mutex> counting{pulled_};
    out = t.counts;
  }
  out.rows = t.rows->rows();
  out.bytes = t.rows->bytes();
  out.evicted += t.rows->cap_replaced();
  out.not_admitted += t.rows->cap_refused();
  auto& top = out.hottest;
  auto hotter = [](const std::pair<int64_t, uint32_t>& a, const std::pair<int64_t, uint32_t>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  for (uint32_t b = 0; b < t.setup.table.buckets.count; ++b)
    t.rows->visit(b, [&](int64_t key, const float*, row_counters c) {
      if (top.size() < hottest) {
        top.emplace_back(key, c.frequency);
        std::push_heap(top.begin(), top.end(), hotter);
      } else if (hottest > 0 && hotter({key, c.frequency}, top.front())) {
        std::pop_heap(top.begin(), top.end(), hotter);
        top.back() = {key, c.frequency};
        std::push_heap(top.begin(), top.end(), hotter);
      }
    });
  std::sort(top.begin(), top.end(), hotter);
  return out;
}

uint64_t table_store::rows() const {
  uint64_t n = 0;
  for (auto& t : tables_)
    n += t.rows->rows();
  return n;
}

uint64_t table_store::bytes() const {
  uint64_t n = 0;
  for (auto& t : tables_)
    n += t.rows->bytes();
  return n;
}

} // namespace troupe
