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
                                     int32_t shards, bool sync, int32_t required,
                                     int64_t first_step) {
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
  sync_ = sync;
  required_ = required;
  step_ = first_step;
  for (auto& s : setups) {
    held t;
    t.setup = s;
    t.rows = std::make_unique<embedding_table>(s.table);
    t.rows->set_byte_cap(s.eviction.max_bytes);
    t.version = first_step;
    if (sync)
      t.sums.emplace(s.table.dim);
    tables_.push_back(std::move(t));
  }
  return std::nullopt;
}

void table_store::reset() {
  std::unique_lock<std::shared_mutex> exclusive{structure_};
  tables_.clear();
  step_ = 0;
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

maybe_failure table_store::check_push(int32_t table, const std::vector<int64_t>& keys,
                                      const std::vector<uint32_t>& counts,
                                      const tensor& grads) const {
  if (auto bad = check_request(table, keys))
    return bad;
  auto dim = tables_[static_cast<size_t>(table)].rows->dim();
  if (counts.size() != keys.size())
    return refused(std::to_string(keys.size()) + " keys but " + std::to_string(counts.size())
                   + " counts");
  if (grads.rank() != 2 || grads.dim(0) != static_cast<int64_t>(keys.size())
      || grads.dim(1) != static_cast<int64_t>(dim))
    return refused("row gradients of shape " + to_string(grads.shape()) + ", expected ["
                   + std::to_string(keys.size()) + ", " + std::to_string(dim) + "]");
  for (size_t i = 0; i < grads.size(); ++i)
    if (!std::isfinite(grads.data()[i]))
      return failure{errc::non_finite_gradient,
                     "a row gradient of table "
                       + tables_[static_cast<size_t>(table)].setup.table.name + " is not finite"};
  return std::nullopt;
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

maybe_failure table_store::apply_rows(held& t, const int64_t* keys, const uint32_t* counts,
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
  auto before = t.rows->rows();
  if (auto bad = t.rows->apply(keys, counts, grads, n, t.version))
    return bad;
  ++t.version;
  t.counts.pushed_keys += n;
  auto created = t.rows->rows() - before;
  t.counts.admitted += created;
  auto& rules = t.setup.eviction;
  bool over_cap = t.rows->at_cap();
  bool due = (rules.after_steps > 0 || rules.l2_below > 0)
             && t.version % t.setup.evict_interval == 0;
  if (over_cap || due)
    t.counts.evicted += t.rows->evict(rules, t.version);
  return std::nullopt;
}

maybe_failure table_store::apply(int32_t table, const std::vector<int64_t>& keys,
                                 const std::vector<uint32_t>& counts, const tensor& grads) {
  if (auto bad = check_push(table, keys, counts, grads))
    return bad;
  auto& t = tables_[static_cast<size_t>(table)];
  return apply_rows(t, keys.data(), counts.data(), grads.data(), keys.size());
}

maybe_failure table_store::add(int32_t worker, int64_t step, int32_t table,
                               const std::vector<int64_t>& keys,
                               const std::vector<uint32_t>& counts, const tensor& grads,
                               sync_verdict& out) {
  if (auto bad = check_push(table, keys, counts, grads))
    return bad;
  auto& t = tables_[static_cast<size_t>(table)];
  if (step < step_)
    out = sync_verdict::stale;
  else if (step > step_)
    out = sync_verdict::ahead;
  else if (!t.contributors.insert(worker).second)
    out = sync_verdict::duplicate;
  else {
    out = sync_verdict::accepted;
    t.sums->add(keys.data(), counts.data(), grads.data(), keys.size());
  }
  return std::nullopt;
}

bool table_store::ready() const {
  if (tables_.empty())
    return false;
  for (auto& t : tables_)
    if (static_cast<int32_t>(t.contributors.size()) < required_)
      return false;
  return true;
}

maybe_failure table_store::apply_step() {
  for (auto& t : tables_) {
    auto rows = t.sums->take(t.setup.reduction, static_cast<uint32_t>(t.contributors.size()));
    t.contributors.clear();
    if (auto bad = apply_rows(t, rows.keys.data(), rows.counts.data(), rows.grads.data(),
                              rows.keys.size()))
      return bad;
  }
  ++step_;
  return std::nullopt;
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
