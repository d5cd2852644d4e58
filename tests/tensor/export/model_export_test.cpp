// A trained model taken away (tensor/export/model_export.hpp): the card
// round-trips, every built-in network is rebuilt from its layer specs with
// the same variables, an export reads back to the same predictions, a
// checkpoint beside its run's model.json loads as a model, and files that
// do not fit are refused by name.
#define BOOST_TEST_MODULE export
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <unistd.h>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/table_file.hpp"
#include "tensor/export/model_export.hpp"
#include "tensor/export/table_export.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using troupe::testing::temp_dir;
namespace fs = std::filesystem;

namespace {

// A `kind` model for examples of shape `input` and `classes` classes.
std::unique_ptr<model> model_for(model_kind kind, shape_t input, int64_t classes) {
  model_options o;
  o.input = std::move(input);
  o.classes = classes;
  return make_model(kind, o);
}

std::vector<tensor> random_values(const model& net, uint32_t seed) {
  std::vector<tensor> out;
  for (auto& v : net.variables())
    out.push_back(initial_value({v.name, v.shape, {initializer::kind::random_normal, 0.3f}}, seed));
  return out;
}

template <class F>
std::string error_of(F f) {
  return testing::message_of<troupe_error>(f);
}

using testing::contains;

// A checkpoint of whole variables in one file, as the chief writes them.
std::string save_checkpoint(const std::string& root, const model& net,
                            const std::vector<tensor>& values, int64_t step) {
  checkpoint_dir dir(root);
  auto staging = dir.begin(step);
  checkpoint_manifest m;
  m.step = step;
  m.fingerprint = {{"model", "test"}, {"optimizer", "sgd"}};
  std::vector<safetensors_writer::entry> entries;
  for (auto& v : net.variables()) {
    m.variables.push_back({v.name, v.shape});
    m.tensors.push_back({v.name, v.name, "", 0, 0, "ps-0.safetensors"});
    entries.push_back({v.name, v.shape});
  }
  m.shard_updates = {step};
  safetensors_writer w((fs::path(staging) / "ps-0.safetensors").string(), entries);
  for (auto& v : values)
    w.append(v);
  auto [crc, bytes] = w.finish();
  m.files.push_back({"ps-0.safetensors", crc, bytes});
  return dir.commit(staging, m, 5);
}

} // namespace

BOOST_AUTO_TEST_SUITE(model_export)

BOOST_AUTO_TEST_CASE(every_built_in_network_is_rebuilt_from_its_layer_specs) {
  for (auto kind : {model_kind::softmax, model_kind::mlp, model_kind::cnn, model_kind::vgg11}) {
    std::string name = name_of(kind);
    auto net = model_for(kind, {28, 28, 1}, 10);
    auto card = describe_model(kind, *net, nullptr, 7);
    auto rebuilt = make_model(model_kind::custom, card.options());
    BOOST_REQUIRE_EQUAL(rebuilt->variables().size(), net->variables().size());
    for (size_t i = 0; i < net->variables().size(); ++i) {
      BOOST_TEST(rebuilt->variables()[i].name == net->variables()[i].name, name);
      BOOST_TEST((rebuilt->variables()[i].shape == net->variables()[i].shape), name);
    }
    // The same values give the same outputs.
    auto values = random_values(*net, 3);
    tensor x({2, 784}), a, b;
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(i % 13) / 13.0f;
    net->predict(values, x, a);
    rebuilt->predict(values, x, b);
    BOOST_TEST(a.bit_equal(b), name);
  }
}

BOOST_AUTO_TEST_CASE(an_export_reads_back_with_its_card) {
  temp_dir d;
  auto net = model_for(model_kind::mlp, {4}, 3);
  auto values = random_values(*net, 5);
  data_split train;
  train.format = data_format::csv;
  train.csv.label_column = "species";
  train.label_names = {"setosa", "versicolor", "virginica"};
  train.norm.kind = normalization::standardize;
  train.norm.mean = {1, 2, 3, 4};
  train.norm.inv_stddev = {0.5f, 1, 2, 4};
  auto card = describe_model(model_kind::mlp, *net, &train, 1200);
  write_model_export(d.file("out"), card, net->variables(), values);
  BOOST_TEST(fs::exists(d.file("out/model.safetensors")));
  auto back = read_model_export(d.file("out"));
  BOOST_TEST(back.card.step == 1200);
  BOOST_TEST(back.card.model == "mlp");
  BOOST_TEST(back.card.label_column == "species");
  BOOST_TEST((back.card.label_names == train.label_names));
  BOOST_TEST((back.card.norm.kind == normalization::standardize));
  BOOST_TEST(back.card.norm.inv_stddev[3] == 4.0f);
  BOOST_REQUIRE_EQUAL(back.params.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i)
    BOOST_TEST(back.params[i].bit_equal(values[i]));
  // model.json must say what the network needs.
  std::string text;
  {
    std::ifstream in(d.file("out/model.json"));
    std::getline(in, text);
  }
  auto broken = text;
  broken.replace(broken.find("\"classes\":3"), 11, "\"classes\":4");
  std::ofstream(d.file("out/model.json")) << broken;
  BOOST_TEST(contains(error_of([&] { read_model_export(d.file("out")); }),
                      "\"label_names\" names 3 classes, but \"classes\" is 4"));
  broken = text;
  broken.replace(broken.find("units=3"), 7, "units=5");
  std::ofstream(d.file("out/model.json")) << broken;
  auto msg = error_of([&] { read_model_export(d.file("out")); });
  BOOST_TEST(contains(msg, "its layers do not build a network"), msg);
  std::ofstream(d.file("out/model.json")) << text;
  fs::remove(d.file("out/model.safetensors"));
  BOOST_TEST(contains(error_of([&] { read_model_export(d.file("out")); }), "model.safetensors"));
}

BOOST_AUTO_TEST_CASE(a_checkpoint_loads_with_the_runs_model_card) {
  temp_dir d;
  auto net = model_for(model_kind::softmax, {6}, 2);
  auto values = random_values(*net, 9);
  auto ckpt = save_checkpoint(d.file("logs"), *net, values, 300);
  BOOST_TEST(contains(error_of([&] { load_model(ckpt); }), "model.json"));
  write_file_atomically(
    d.file("logs/model.json"),
    json::write(describe_model(model_kind::softmax, *net, nullptr, 0).to_json()));
  auto loaded = load_model(ckpt);
  BOOST_TEST(loaded.card.step == 300);
  BOOST_TEST(loaded.params[0].bit_equal(values[0]));
  BOOST_TEST(contains(error_of([&] { load_model(d.file("nothing")); }),
                      "neither an exported model (model.json) nor a checkpoint"));
  // Another model's card: named by variable and shape.
  auto other = model_for(model_kind::softmax, {6}, 3);
  write_file_atomically(
    d.file("logs/model.json"),
    json::write(describe_model(model_kind::softmax, *other, nullptr, 0).to_json()));
  auto msg = error_of([&] { load_model(ckpt); });
  BOOST_TEST(contains(msg, "softmax/weights has shape [6, 2] there, but the model's is [6, 3]"),
             msg);
}

BOOST_AUTO_TEST_CASE(inputs_must_hold_the_models_features) {
  temp_dir d;
  std::ofstream(d.file("in.csv")) << "a,b,c\n1,2,3\n";
  model_card card;
  card.input = {4};
  card.classes = 2;
  csv_layout csv;
  csv.label_column.clear();
  auto msg = error_of(
    [&] { split_for_model(card, data_format::csv, {d.file("in.csv")}, {}, csv, false); });
  BOOST_TEST(contains(msg, "examples of 3 values (shape [3]), but the model takes 4 (shape [4])"),
             msg);
}

// What training made of empty cells travels in the card: prediction fills
// them the same way, and a card from before data.missing-values refuses them.
BOOST_AUTO_TEST_CASE(the_card_fills_empty_cells_as_training_did) {
  temp_dir d;
  std::ofstream(d.file("in.csv")) << "a,b\n1,\n,2\n";
  model_card card;
  card.input = {3};
  card.classes = 2;
  card.missing = {{"a", "b"}, {std::nanf(""), 7.5f}, {0, 1}};
  auto back = model_card::from_json(card.to_json(), "model.json");
  BOOST_TEST((back.missing.column == card.missing.column));
  BOOST_TEST(std::isnan(back.missing.value[0]));
  BOOST_TEST(back.missing.value[1] == 7.5f);
  BOOST_TEST((back.missing.indicator == card.missing.indicator));
  csv_layout csv;
  csv.label_column.clear();
  csv.header = true;
  auto split = split_for_model(back, data_format::csv, {d.file("in.csv")}, {}, csv, false);
  example_source source(split, 0);
  std::vector<float> x(3);
  int32_t label;
  float target;
  BOOST_REQUIRE(source.next(x.data(), label, target));
  BOOST_TEST((x == std::vector<float>{1, 7.5f, 1}));
  // a is refused: the second row is a bad record, named.
  auto msg = error_of([&] { source.next(x.data(), label, target); });
  BOOST_TEST(contains(msg, "column 'a' (0) is empty"), msg);
  // A card without "missing" reads an empty cell as a bad record.
  card.missing = {};
  card.input = {2};
  card = model_card::from_json(card.to_json(), "model.json");
  BOOST_TEST(!card.missing.known());
  split = split_for_model(card, data_format::csv, {d.file("in.csv")}, {}, csv, false);
  example_source plain(split, 0);
  msg = error_of([&] { plain.next(x.data(), label, target); });
  BOOST_TEST(contains(msg, "column 'b' (1) is empty"), msg);
  // Columns that differ from training's are named.
  std::ofstream(d.file("other.csv")) << "a,c\n1,2\n";
  msg = error_of(
    [&] { split_for_model(back, data_format::csv, {d.file("other.csv")}, {}, csv, false); });
  BOOST_TEST(contains(msg, "numeric column 2 is 'c', but in training it was 'b'"), msg);
}

// An embedding model's export: its card (layout, dim, the table's
// initializer with a 64-bit seed) read back, its rows by key, an unseen key
// predicted from its initial row as in training, and a card without its
// table refused.
BOOST_AUTO_TEST_CASE(an_embedding_model_exports_its_table_by_key) {
  temp_dir d;
  model_options o;
  o.keys = {1, 2, 1};
  o.classes = 2;
  o.embedding_dim = 3;
  auto net = make_model(model_kind::fm, o);
  model_card card = describe_model(model_kind::fm, *net, nullptr, 9);
  card.keys = o.keys;
  card.table_init = {row_initializer::normal, 0.1, 0xfedcba9876543210ull};
  embedding_table_config config;
  config.name = "embedding";
  config.dim = 4;
  config.init = card.table_init;
  config.optimizer.kind = sparse_optimizer_kind::sgd;
  auto table = std::make_shared<embedding_table>(config);
  float row[4] = {0.5f, 1, 2, 3};
  table->restore(int64_t{1} << 50, row, {});
  auto values = initial_values(*net, 1);
  write_model_export(d.file("export"), card, net->variables(), values, rows_of_table(table).get());
  BOOST_TEST(!std::filesystem::exists(d.file("export/model.onnx")));
  auto loaded = load_model(d.file("export"));
  BOOST_TEST(loaded.card.table_init.seed == 0xfedcba9876543210ull);
  BOOST_TEST(loaded.card.embedding_dim == 3);
  BOOST_REQUIRE(loaded.table);
  BOOST_TEST(loaded.table->rows() == 1u);
  float back[8];
  int64_t keys[2] = {int64_t{1} << 50, 77};
  loaded.table->lookup(keys, 2, back);
  BOOST_TEST(back[3] == 3.0f);
  float initial[4];
  table->lookup(keys + 1, 1, initial); // the unseen key: the same initial row
  BOOST_TEST(back[4] == initial[0]);
  batch b;
  b.images = tensor({1, o.keys.width()});
  pack_key(keys[0], 1.0f, b.images.data() + 1);
  pack_key(keys[1], 1.0f, b.images.data() + 5);
  b.labels = {1};
  tensor outputs;
  predict_batch(loaded, b, outputs);
  BOOST_TEST(outputs.shape() == (shape_t{1, 2}));
  BOOST_TEST(outputs[0] == 0.0f);
  // A card that claims the model but lost its table is refused by name.
  BOOST_TEST(
    contains(error_of([&] { write_model_export(d.file("bad"), card, net->variables(), values); }),
             "needs its embedding table"));
}

// The table's rows go into the file a bucket at a time: every key once,
// each with its own values, over many buckets; an empty table gives two
// empty entries.
BOOST_AUTO_TEST_CASE(the_tables_rows_are_written_bucket_by_bucket_keys_beside_their_values) {
  temp_dir d;
  embedding_table_config config;
  config.name = "embedding";
  config.dim = 3;
  config.buckets.count = 64;
  config.optimizer.kind = sparse_optimizer_kind::sgd;
  for (int64_t count : {int64_t{0}, int64_t{500}}) {
    embedding_table table(config);
    for (int64_t k = 0; k < count; ++k) {
      float row[3] = {float(k), float(k) + 0.5f, -float(k)};
      table.restore(k * 7919, row, {});
    }
    auto path = d.file("rows-" + std::to_string(count) + ".safetensors");
    {
      safetensors_writer writer(
        path, {{table_keys_name, {count}, element_type::i64}, {table_values_name, {count, 3}}}, {});
      append_table_rows(writer, table);
      writer.finish();
    }
    safetensors_file file(path);
    auto keys = file.read_i64(table_keys_name);
    auto values = file.read(table_values_name);
    BOOST_TEST_REQUIRE(keys.size() == static_cast<size_t>(count));
    std::vector<bool> seen(static_cast<size_t>(count), false);
    for (size_t i = 0; i < keys.size(); ++i) {
      BOOST_TEST_REQUIRE(keys[i] % 7919 == 0);
      auto k = static_cast<size_t>(keys[i] / 7919);
      BOOST_TEST(!seen[k]);
      seen[k] = true;
      BOOST_TEST(values[i * 3] == float(k));
      BOOST_TEST(values[i * 3 + 1] == float(k) + 0.5f);
      BOOST_TEST(values[i * 3 + 2] == -float(k));
    }
  }
}

// A custom network over an embedding layer (dim 3, `combiner`) for one
// dense value and two fields, its card (the dense value standardized: one
// mean and stddev) and its hash table's config.
struct custom_table_model {
  model_options o;
  std::shared_ptr<model> net;
  model_card card;
  embedding_table_config config;

  explicit custom_table_model(const std::string& combiner) {
    o.keys = {1, 2, 1};
    o.classes = 2;
    o.layers = {"embedding dim=3 combiner=" + combiner, "dense units=4", "relu", "dense units=2"};
    net = make_model(model_kind::custom, o);
    card = describe_model(model_kind::custom, *net, nullptr, 5);
    card.keys = o.keys;
    card.norm.kind = normalization::standardize;
    card.norm.mean = {0.5f};
    card.norm.inv_stddev = {2.0f};
    config.name = "embedding";
    config.dim = card.table_dim();
    config.init = {row_initializer::normal, 0.1, 5};
    card.table_init = config.init;
    config.optimizer.kind = sparse_optimizer_kind::sgd;
  }
};

// A custom network over an embedding layer exports like the built-in
// embedding models: its layer list (the embedding layer first) rebuilds the
// same network, the table's rows are its dim wide, the statistics of its
// dense values read back, predictions read back the same, and there is no
// model.onnx.
BOOST_AUTO_TEST_CASE(a_custom_network_over_an_embedding_layer_exports_its_layers_and_table) {
  temp_dir d;
  custom_table_model m("sum");
  auto& [o, net, card, config] = m;
  BOOST_TEST(card.layers.front() == "embedding name=embedding0 dim=3 combiner=sum");
  BOOST_TEST(card.table_dim() == 3u);
  auto table = std::make_shared<embedding_table>(config);
  float row[3] = {0.5f, -1, 2};
  table->restore(42, row, {});
  auto values = random_values(*net, 3);
  write_model_export(d.file("export"), card, net->variables(), values, rows_of_table(table).get());
  BOOST_TEST(!std::filesystem::exists(d.file("export/model.onnx")));
  auto loaded = load_model(d.file("export"));
  BOOST_TEST(loaded.card.layers == card.layers);
  BOOST_TEST(loaded.card.norm.mean == card.norm.mean);
  BOOST_REQUIRE(loaded.table);
  BOOST_TEST(loaded.table->dim() == 3u);
  BOOST_TEST(loaded.net->variables().size() == net->variables().size());
  batch b;
  b.images = tensor({1, o.keys.width()});
  b.images.data()[0] = 0.25f;
  pack_key(42, 1.0f, b.images.data() + 1);
  pack_key(7, 1.0f, b.images.data() + 5);
  b.labels = {1};
  batch_rows rows;
  int64_t ids[2] = {42, 7};
  rows.keys.assign(ids, 2);
  rows.values.resize(6);
  table->lookup(rows.keys.keys().data(), 2, rows.values.data());
  tensor expected, outputs;
  net->predict_rows(values, b, rows, expected);
  predict_batch(loaded, b, outputs);
  BOOST_TEST(outputs.shape() == (shape_t{1, 2}));
  BOOST_TEST(outputs[1] == expected[0]);
}

// Over a fixed-size table the same network also gets a model.onnx: the
// masked Gather into its layers (Gemm, Relu), its dense value standardized
// in the graph (embedding_models_test evaluates such a file against
// troupe-predict); over a hash table the refusal says why.
BOOST_AUTO_TEST_CASE(a_custom_network_over_a_fixed_table_exports_onnx) {
  temp_dir d;
  custom_table_model m("mean");
  auto& [o, net, card, config] = m;
  card.vocabulary = {5, 7};
  config.kind = table_kind::fixed;
  config.rows = 12;
  auto table = rows_of_table(std::make_shared<embedding_table>(config));
  auto values = random_values(*net, 3);
  auto written = write_model_export(d.file("export"), card, net->variables(), values, table.get());
  BOOST_TEST(written == "model.safetensors, model.onnx, model.json");
  auto onnx = read_file_bounded(d.file("export/model.onnx"), 1 << 20);
  for (auto op : {"Gather", "Gemm", "Relu", "Concat", "Softmax", "inv_stddev", "mean"})
    BOOST_TEST(contains(onnx, op), op);
  card.vocabulary.clear(); // a hash table: no ONNX, and why
  config.kind = table_kind::hash;
  auto hashed = rows_of_table(std::make_shared<embedding_table>(config));
  BOOST_TEST(
    contains(write_model_export(d.file("hashed"), card, net->variables(), values, hashed.get()),
             "its table is a hash table"));
}

// A hash table's checkpoint files as two shards save them (Adagrad: slots
// the export leaves out), streamed into the export: every key once with its
// own values, the same rows as the table rebuilt in memory exports.
BOOST_AUTO_TEST_CASE(a_hash_table_streams_from_checkpoint_files_into_the_export) {
  temp_dir d;
  custom_table_model m("sum");
  auto config = m.config;
  config.optimizer.kind = sparse_optimizer_kind::adagrad;
  config.buckets.count = 64;
  std::vector<std::unique_ptr<embedding_table>> shards;
  shards.push_back(std::make_unique<embedding_table>(config));
  shards.push_back(std::make_unique<embedding_table>(config));
  auto whole = std::make_shared<embedding_table>(m.config);
  for (int64_t k = 0; k < 300; ++k) {
    int64_t key = k * 104729 + (k % 3 == 0 ? int64_t{1} << 50 : 0);
    float row[9] = {float(k), -float(k), 0.5f * float(k), 1, 1, 1, 1, 1, 1};
    shards[config.shard_of(key, 2)]->restore(key, row, {});
    whole->restore(key, row, {});
  }
  std::vector<std::unique_ptr<safetensors_file>> files;
  std::vector<std::pair<std::string, const safetensors_file*>> named;
  for (size_t s = 0; s < shards.size(); ++s) {
    auto path = d.file("shard-" + std::to_string(s) + ".safetensors");
    {
      table_snapshot snapshot(*shards[s]);
      safetensors_writer writer(path, snapshot.entries(), {snapshot.metadata()});
      snapshot.append_to(writer);
      writer.finish();
    }
    files.push_back(std::make_unique<safetensors_file>(path));
    named.emplace_back(path, files.back().get());
  }
  BOOST_TEST_REQUIRE(shards[0]->rows() > 0u);
  BOOST_TEST_REQUIRE(shards[1]->rows() > 0u);
  auto values = initial_values(*m.net, 1);
  auto streamed = rows_of_saved_table(named, m.card);
  BOOST_TEST(streamed->rows() == 300u);
  BOOST_TEST(!streamed->table());
  write_model_export(d.file("streamed"), m.card, m.net->variables(), values, streamed.get());
  write_model_export(d.file("in-memory"), m.card, m.net->variables(), values,
                     rows_of_table(whole).get());
  std::map<int64_t, std::vector<float>> by_key[2];
  for (int e = 0; e < 2; ++e) {
    safetensors_file file(d.file(e == 0 ? "streamed" : "in-memory") + "/model.safetensors");
    auto keys = file.read_i64(table_keys_name);
    auto rows = file.read(table_values_name);
    BOOST_TEST_REQUIRE(rows.shape() == (shape_t{300, 3}));
    for (size_t i = 0; i < keys.size(); ++i)
      by_key[e][keys[i]].assign(rows.data() + 3 * i, rows.data() + 3 * i + 3);
  }
  BOOST_TEST(by_key[0].size() == 300u); // every key once
  BOOST_TEST((by_key[0] == by_key[1]));
  auto loaded = load_model(d.file("streamed"));
  BOOST_TEST_REQUIRE(loaded.table);
  int64_t key = 7 * 104729;
  float back[3];
  loaded.table->lookup(&key, 1, back);
  BOOST_TEST(back[0] == 7.0f);
  BOOST_TEST(back[2] == 3.5f);
}

namespace {

// A table's rows in a file written by hand, as a checkpoint holds them
// (dim 3, 64 buckets), each key listed in bucket `buckets[i]`.
std::string hand_written_rows(const std::string& path, const std::vector<int64_t>& keys,
                              const std::vector<uint32_t>& buckets, std::vector<float> values,
                              const std::string& layout = "dim=3 buckets=64 bucket_seed=0") {
  std::vector<uint32_t> bucket_rows(64, 0);
  for (auto b : buckets)
    ++bucket_rows.at(b);
  auto n = static_cast<int64_t>(keys.size());
  safetensors_writer writer(path,
                            {{"emb/embedding/keys", {n}, element_type::i64},
                             {"emb/embedding/values", {n, 3}},
                             {"emb/embedding/bucket_rows", {64}, element_type::u32}},
                            {{"emb/embedding", layout + " optimizer=sgd"}});
  writer.append(keys.data(), keys.size() * sizeof(int64_t));
  values.resize(keys.size() * 3, 0.5f);
  writer.append(values.data(), values.size() * sizeof(float));
  writer.append(bucket_rows.data(), bucket_rows.size() * sizeof(uint32_t));
  writer.finish();
  return path;
}

} // namespace

// Files that lie about the table are refused by name, before the export
// moves into place: a bucket in two files, a key outside the bucket its
// file lists, a key twice, a negative key, a value not finite, rows per
// bucket that do not add up, another dim, buckets that differ between files.
BOOST_AUTO_TEST_CASE(checkpoint_rows_that_lie_are_refused_by_name) {
  temp_dir d;
  custom_table_model m("sum");
  auto values = initial_values(*m.net, 1);
  bucket_layout layout{64, 0};
  int64_t a = 11, b = 12;
  while (layout.bucket_of(b) == layout.bucket_of(a))
    ++b;
  if (layout.bucket_of(a) > layout.bucket_of(b)) // a file lists its rows in bucket order
    std::swap(a, b);
  uint32_t ba = layout.bucket_of(a), bb = layout.bucket_of(b);
  auto refusal = [&](std::vector<std::string> paths) {
    std::vector<std::unique_ptr<safetensors_file>> files;
    std::vector<std::pair<std::string, const safetensors_file*>> named;
    for (auto& p : paths) {
      files.push_back(std::make_unique<safetensors_file>(p));
      named.emplace_back(p, files.back().get());
    }
    return error_of([&] {
      auto rows = rows_of_saved_table(named, m.card);
      write_model_export(d.file("out"), m.card, m.net->variables(), values, rows.get());
    });
  };
  auto good = hand_written_rows(d.file("good"), {a, b}, {ba, bb}, {});
  BOOST_TEST(refusal({good}) == "no error");
  auto msg = refusal({good, good});
  BOOST_TEST(contains(msg, "has rows in"), msg);
  msg = refusal({hand_written_rows(d.file("moved"), {a, b}, {ba, ba}, {})});
  BOOST_TEST(contains(msg, "key " + std::to_string(b) + " is listed in bucket"), msg);
  msg = refusal({hand_written_rows(d.file("twice"), {a, a}, {ba, ba}, {})});
  BOOST_TEST(contains(msg, "key " + std::to_string(a) + " is in the table twice"), msg);
  msg = refusal({hand_written_rows(d.file("negative"), {-a}, {layout.bucket_of(-a)}, {})});
  BOOST_TEST(contains(msg, "negative"), msg);
  msg = refusal({hand_written_rows(d.file("nan"), {a, b}, {ba, bb}, {1, 2, 3, 4, std::nanf("")})});
  BOOST_TEST(contains(msg, "not finite"), msg);
  // rows per bucket that add up to 2, beside 3 keys
  msg = refusal({hand_written_rows(d.file("uneven"), {a, b, b + 64}, {ba, bb}, {})});
  BOOST_TEST(contains(msg, "disagree"), msg);
  msg = refusal(
    {hand_written_rows(d.file("dim"), {a}, {ba}, {}, "dim=4 buckets=64 bucket_seed=0")});
  BOOST_TEST(contains(msg, "hold 4 values, the model's 3"), msg);
  msg = refusal(
    {good, hand_written_rows(d.file("seed"), {}, {}, {}, "dim=3 buckets=64 bucket_seed=9")});
  BOOST_TEST(contains(msg, "differ"), msg);
}

BOOST_AUTO_TEST_SUITE_END()
