#include "tensor/export/table_export.hpp"

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
  if (!model.table) {
    model.net->predict(model.params, b.images, outputs);
    return;
  }
  std::vector<int64_t> ids;
  batch_rows rows;
  model.net->batch_keys(b, ids);
  rows.keys.assign(ids.data(), ids.size());
  rows.values.resize(rows.keys.size() * model.table->dim());
  model.table->lookup(rows.keys.keys().data(), rows.keys.size(), rows.values.data());
  tensor y;
  model.net->predict_rows(model.params, b, rows, y);
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
