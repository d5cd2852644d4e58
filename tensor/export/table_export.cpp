#include "tensor/export/table_export.hpp"

#include <algorithm>
#include <optional>

#include "tensor/checkpoint/table_file.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/export/model_export.hpp"

namespace troupe {

namespace {

// Values only: a table without optimizer slots, the run's initial rows.
std::shared_ptr<embedding_table> empty_table(const model_card& card) {
  embedding_table_config config;
  config.name = "embedding";
  config.dim = card.table_dim();
  config.init = card.table_init;
  config.optimizer.kind = sparse_optimizer_kind::sgd;
  if (!card.vocabulary.empty()) {
    config.kind = table_kind::fixed;
    config.rows = fixed_vocabulary(card.vocabulary, card.ids).rows();
  }
  return std::make_shared<embedding_table>(config);
}

void fill(embedding_table& table, const std::vector<int64_t>& keys, const tensor& values,
          const std::string& where) {
  auto dim = static_cast<int64_t>(table.dim());
  if (values.rank() != 2 || values.dim(0) != static_cast<int64_t>(keys.size())
      || values.dim(1) != dim)
    throw checkpoint_error(where + ": the table's values have shape " + to_string(values.shape())
                           + ", expected [" + std::to_string(keys.size()) + ", "
                           + std::to_string(dim) + "]");
  if (values.first_non_finite() != values.size())
    throw checkpoint_error(where + ": the table holds a value that is not finite");
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!table.config().holds(keys[i]))
      throw checkpoint_error(where + ": the table holds key " + std::to_string(keys[i])
                             + (keys[i] < 0 ? ", negative" : ", past its fixed size"));
    table.restore(keys[i], values.data() + i * static_cast<size_t>(dim), {});
  }
}

class table_in_memory final : public table_rows {
public:
  explicit table_in_memory(std::shared_ptr<const embedding_table> table)
    : table_(std::move(table)) {}
  size_t rows() const override { return table_->rows(); }
  void append_to(safetensors_writer& writer) const override { append_table_rows(writer, *table_); }
  void for_each_range(const range_visitor& f) const override {
    std::vector<int64_t> keys;
    std::vector<float> values;
    auto dim = table_->dim();
    for (uint32_t b = 0; b < table_->config().buckets.count; ++b) {
      keys.clear();
      values.clear();
      table_->visit(b, [&](int64_t key, const float* payload, row_counters) {
        keys.push_back(key);
        values.insert(values.end(), payload, payload + dim);
      });
      if (!keys.empty())
        f(keys.data(), values.data(), keys.size());
    }
  }
  const embedding_table* table() const override { return table_.get(); }

private:
  std::shared_ptr<const embedding_table> table_;
};

// Rows read per range: a few MB of values at the usual dims.
constexpr size_t rows_per_range = size_t{1} << 16;

class saved_table_rows final : public table_rows {
public:
  saved_table_rows(const std::vector<std::pair<std::string, const safetensors_file*>>& files,
                   const model_card& card);
  size_t rows() const override { return rows_; }
  void append_to(safetensors_writer& writer) const override;
  void for_each_range(const range_visitor& f) const override;
  const embedding_table* table() const override { return nullptr; }

private:
  struct saved_file {
    std::string where;
    const safetensors_file* file;
    size_t rows;
    std::vector<uint32_t> bucket_rows;
  };
  void append_keys(const saved_file& f, safetensors_writer& writer) const;
  void append_values(const saved_file& f, safetensors_writer& writer) const;

  uint32_t dim_;
  bucket_layout buckets_;
  std::vector<saved_file> files_;
  size_t rows_ = 0;
};

saved_table_rows::saved_table_rows(
  const std::vector<std::pair<std::string, const safetensors_file*>>& files, const model_card& card)
  : dim_(card.table_dim()) {
  std::optional<saved_layout> first;
  std::vector<const std::string*> bucket_owner;
  for (auto& [where, file] : files) {
    auto layout = read_saved_layout(*file, "embedding", where);
    if (layout.kind == table_kind::fixed)
      throw checkpoint_error(where + ": a fixed-size table, where the model card has a hash table");
    if (layout.dim != dim_)
      throw checkpoint_error(where + ": the table's rows hold " + std::to_string(layout.dim)
                             + " values, the model's " + std::to_string(dim_));
    if (!first) {
      first = layout;
      buckets_ = layout.buckets;
      bucket_owner.assign(buckets_.count, nullptr);
    } else if (layout.buckets.count != buckets_.count || layout.buckets.seed != buckets_.seed) {
      throw checkpoint_error(where + ": the table's buckets ('" + layout.text + "') differ from '"
                             + first->text + "' in another file of the checkpoint");
    }
    auto& keys = file->find("emb/embedding/keys", element_type::i64);
    auto n = static_cast<size_t>((keys.end - keys.begin) / sizeof(int64_t));
    if (file->find("emb/embedding/values", element_type::f32).shape
        != shape_t{static_cast<int64_t>(n), static_cast<int64_t>(dim_)})
      throw checkpoint_error(where + ": the table's values are not [" + std::to_string(n) + ", "
                             + std::to_string(dim_) + "], one row per key");
    auto bucket_rows = file->read_u32("emb/embedding/bucket_rows");
    uint64_t listed = 0;
    for (uint32_t b = 0; b < bucket_rows.size() && b < buckets_.count; ++b) {
      listed += bucket_rows[b];
      if (bucket_rows[b] == 0)
        continue;
      if (bucket_owner[b])
        throw checkpoint_error(where + ": bucket " + std::to_string(b) + " has rows in "
                               + *bucket_owner[b] + " too; a bucket is one shard's");
      bucket_owner[b] = &where;
    }
    if (bucket_rows.size() != buckets_.count || listed != n)
      throw checkpoint_error(where + ": its rows per bucket (" + std::to_string(bucket_rows.size())
                             + " buckets, " + std::to_string(listed) + " rows) disagree with its "
                             + std::to_string(buckets_.count) + " buckets and " + std::to_string(n)
                             + " keys");
    files_.push_back({where, file, n, std::move(bucket_rows)});
    rows_ += n;
  }
}

// A range of keys at a time, each checked against the bucket its file
// lists it in, and against the others of that bucket (sorted at its end).
void saved_table_rows::append_keys(const saved_file& f, safetensors_writer& writer) const {
  std::vector<int64_t> keys, in_bucket;
  uint32_t bucket = 0;
  uint32_t left = f.bucket_rows.empty() ? 0 : f.bucket_rows[0];
  auto bucket_done = [&] {
    std::sort(in_bucket.begin(), in_bucket.end());
    auto twice = std::adjacent_find(in_bucket.begin(), in_bucket.end());
    if (twice != in_bucket.end())
      throw checkpoint_error(f.where + ": key " + std::to_string(*twice)
                             + " is in the table twice");
    in_bucket.clear();
  };
  for (size_t at = 0; at < f.rows; at += rows_per_range) {
    size_t n = std::min(rows_per_range, f.rows - at);
    keys.resize(n);
    f.file->read_part("emb/embedding/keys", element_type::i64, at * sizeof(int64_t),
                      n * sizeof(int64_t), keys.data());
    for (int64_t key : keys) {
      while (left == 0) { // the rows listed add up to f.rows: a bucket with rows is ahead
        bucket_done();
        left = f.bucket_rows[++bucket];
      }
      if (key < 0)
        throw checkpoint_error(f.where + ": the table holds key " + std::to_string(key)
                               + ", negative");
      if (buckets_.bucket_of(key) != bucket)
        throw checkpoint_error(f.where + ": key " + std::to_string(key) + " is listed in bucket "
                               + std::to_string(bucket) + ", but belongs to bucket "
                               + std::to_string(buckets_.bucket_of(key)));
      in_bucket.push_back(key);
      --left;
    }
    writer.append_part(keys.data(), n * sizeof(int64_t));
  }
  bucket_done();
}

void saved_table_rows::append_values(const saved_file& f, safetensors_writer& writer) const {
  std::vector<float> values;
  for (size_t at = 0; at < f.rows; at += rows_per_range) {
    size_t n = std::min(rows_per_range, f.rows - at) * dim_;
    values.resize(n);
    f.file->read_part("emb/embedding/values", element_type::f32, at * dim_ * sizeof(float),
                      n * sizeof(float), values.data());
    if (first_non_finite(values.data(), n) != n)
      throw checkpoint_error(f.where + ": the table holds a value that is not finite");
    writer.append_part(values.data(), n * sizeof(float));
  }
}

void saved_table_rows::for_each_range(const range_visitor& f) const {
  std::vector<int64_t> keys;
  std::vector<float> values;
  for (auto& file : files_)
    for (size_t at = 0; at < file.rows; at += rows_per_range) {
      size_t n = std::min(rows_per_range, file.rows - at);
      keys.resize(n);
      values.resize(n * dim_);
      file.file->read_part("emb/embedding/keys", element_type::i64, at * sizeof(int64_t),
                           n * sizeof(int64_t), keys.data());
      file.file->read_part("emb/embedding/values", element_type::f32, at * dim_ * sizeof(float),
                           values.size() * sizeof(float), values.data());
      for (int64_t key : keys)
        if (key < 0)
          throw checkpoint_error(file.where + ": the table holds key " + std::to_string(key)
                                 + ", negative");
      if (first_non_finite(values.data(), values.size()) != values.size())
        throw checkpoint_error(file.where + ": the table holds a value that is not finite");
      f(keys.data(), values.data(), n);
    }
}

void saved_table_rows::append_to(safetensors_writer& writer) const {
  if (rows_ == 0) { // two empty entries
    writer.append_part(nullptr, 0);
    writer.append_part(nullptr, 0);
    return;
  }
  for (auto& f : files_)
    append_keys(f, writer);
  for (auto& f : files_)
    append_values(f, writer);
}

} // namespace

void append_table_rows(safetensors_writer& writer, const embedding_table& table) {
  if (table.rows() == 0) { // two empty entries
    writer.append_part(nullptr, 0);
    writer.append_part(nullptr, 0);
    return;
  }
  std::vector<int64_t> keys;
  for (uint32_t b = 0; b < table.config().buckets.count; ++b) {
    keys.clear();
    table.visit(b, [&](int64_t key, const float*, row_counters) { keys.push_back(key); });
    if (!keys.empty())
      writer.append_part(keys.data(), keys.size() * sizeof(int64_t));
  }
  std::vector<float> values;
  for (uint32_t b = 0; b < table.config().buckets.count; ++b) {
    values.clear();
    table.visit(b, [&](int64_t, const float* payload, row_counters) {
      values.insert(values.end(), payload, payload + table.dim());
    });
    if (!values.empty())
      writer.append_part(values.data(), values.size() * sizeof(float));
  }
}

std::shared_ptr<embedding_table> table_from_checkpoint(const checkpoint_reader& reader,
                                                       const model_card& card) {
  auto table = empty_table(card);
  size_t files = 0;
  for (auto& [name, file] : reader.files()) {
    if (file.entries().count("emb/embedding/keys") == 0)
      continue;
    ++files;
    fill(*table, file.read_i64("emb/embedding/keys"), file.read("emb/embedding/values"),
         reader.dir() + "/" + name);
  }
  if (files == 0)
    throw checkpoint_error(reader.dir() + ": holds no embedding table (emb/embedding/keys)");
  return table;
}

std::unique_ptr<table_rows> rows_of_table(std::shared_ptr<const embedding_table> table) {
  return std::make_unique<table_in_memory>(std::move(table));
}

std::unique_ptr<table_rows>
rows_of_saved_table(const std::vector<std::pair<std::string, const safetensors_file*>>& files,
                    const model_card& card) {
  return std::make_unique<saved_table_rows>(files, card);
}

std::unique_ptr<table_rows> rows_of_checkpoint(const checkpoint_reader& reader,
                                               const model_card& card) {
  if (!card.vocabulary.empty())
    return rows_of_table(table_from_checkpoint(reader, card));
  std::vector<std::pair<std::string, const safetensors_file*>> files;
  for (auto& [name, file] : reader.files())
    if (file.entries().count("emb/embedding/keys") != 0)
      files.emplace_back(reader.dir() + "/" + name, &file);
  if (files.empty())
    throw checkpoint_error(reader.dir() + ": holds no embedding table (emb/embedding/keys)");
  return rows_of_saved_table(files, card);
}

std::shared_ptr<embedding_table> table_from_export(const safetensors_file& weights,
                                                   const model_card& card) {
  auto table = empty_table(card);
  if (weights.entries().count(table_keys_name) == 0)
    throw checkpoint_error("model.safetensors lacks " + std::string(table_keys_name));
  fill(*table, weights.read_i64(table_keys_name), weights.read(table_values_name),
       "model.safetensors");
  return table;
}

void predict_batch(exported_model& model, const batch& b, tensor& outputs) {
  predict_batch(*model.net, model, b, outputs);
}

void predict_batch(troupe::model& net, const exported_model& model, const batch& b,
                   tensor& outputs) {
  if (!model.table) {
    net.predict(model.params, b.images, outputs);
    return;
  }
  std::vector<int64_t> ids;
  batch_rows rows;
  net.batch_keys(b, ids);
  rows.keys.assign(ids.data(), ids.size());
  rows.values.resize(rows.keys.size() * model.table->dim());
  model.table->lookup(rows.keys.keys().data(), rows.keys.size(), rows.values.data());
  tensor y;
  net.predict_rows(model.params, b, rows, y);
  auto n = static_cast<int64_t>(b.size());
  if (model.card.task == objective::regression) {
    outputs = std::move(y);
    return;
  }
  outputs = tensor({n, 2});
  for (int64_t e = 0; e < n; ++e) {
    outputs.data()[2 * e] = 0.0f;
    outputs.data()[2 * e + 1] = y.data()[e];
  }
}

} // namespace troupe
