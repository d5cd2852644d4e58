// Delta exports (tensor/export/delta_export.hpp, delta_series.hpp): the
// base and the deltas after it, applied in order, equal the full export of
// every version bit for bit, through rows updated, evicted, re-admitted, a
// table restored to an older checkpoint, a table resharded, and the chief
// restarted; and a delta that does not apply (damaged, out of order, not
// finite) is refused whole, naming both versions.
#define BOOST_TEST_MODULE delta_export
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/table_file.hpp"
#include "tensor/export/delta_export.hpp"
#include "tensor/export/delta_series.hpp"
#include "tensor/export/table_export.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t buckets = 64;

// A run of an fm model whose table lives on `shards` shards; a test moves
// it step by step and checkpoints it as the chief does.
struct fake_run {
  explicit fake_run(std::string root) : root(std::move(root)) {
    options.keys = {1, 2, 1};
    options.classes = 2;
    options.embedding_dim = 3;
    net = make_model(model_kind::fm, options);
    card = describe_model(model_kind::fm, *net, nullptr, 0);
    card.keys = options.keys;
    card.table_init = {row_initializer::normal, 0.1, 7};
    fs::create_directories(this->root);
    write_file_atomically(this->root + "/model.json", json::write(card.to_json()) + "\n");
    truth = std::make_unique<embedding_table>(table_config());
    dense = initial_values(*net, 1);
  }

  embedding_table_config table_config() const {
    embedding_table_config config;
    config.name = "embedding";
    config.dim = card.table_dim();
    config.init = card.table_init;
    config.optimizer.kind = sparse_optimizer_kind::adagrad;
    config.buckets.count = buckets;
    return config;
  }

  // `n` updates of random keys in [0, key_range), a change of every dense
  // variable.
  void train(size_t n, int64_t key_range) {
    std::uniform_int_distribution<int64_t> key(0, key_range - 1);
    std::normal_distribution<float> grad(0, 1);
    for (size_t i = 0; i < n; ++i) {
      int64_t k = key(rng);
      uint32_t count = 1;
      std::vector<float> g(truth->dim());
      for (auto& x : g)
        x = grad(rng);
      BOOST_REQUIRE(!truth->apply(&k, &count, g.data(), 1, ++step));
    }
    for (auto& v : dense)
      v.data()[rng() % v.size()] += 0.25f;
  }

  void evict(std::vector<int64_t> keys) { truth->erase(keys.data(), keys.size()); }

  // A checkpoint of the run now, the table split among `shards` files by
  // its buckets' owners; returns its directory.
  std::string checkpoint(uint32_t shards) {
    std::vector<std::unique_ptr<embedding_table>> parts;
    for (uint32_t s = 0; s < shards; ++s)
      parts.push_back(std::make_unique<embedding_table>(table_config()));
    for (uint32_t b = 0; b < buckets; ++b)
      truth->visit(b, [&](int64_t key, const float* payload, row_counters c) {
        parts[truth->config().shard_of(key, shards)]->restore(key, payload, c);
      });
    checkpoint_dir dir(root);
    auto staging = dir.begin(step);
    checkpoint_manifest m;
    m.step = step;
    m.fingerprint = {{"model", "test"}};
    m.shard_updates.assign(shards, step);
    for (uint32_t s = 0; s < shards; ++s) {
      auto name = "ps-" + std::to_string(s) + ".safetensors";
      table_snapshot snapshot(*parts[s]);
      auto entries = snapshot.entries();
      if (s == 0)
        for (auto& v : net->variables()) {
          m.variables.push_back({v.name, v.shape});
          m.tensors.push_back({v.name, v.name, "", 0, 0, name});
          entries.insert(entries.begin(), {v.name, v.shape});
        }
      safetensors_writer w((fs::path(staging) / name).string(), entries, {snapshot.metadata()});
      if (s == 0)
        for (auto v = dense.rbegin(); v != dense.rend(); ++v)
          w.append(*v);
      snapshot.append_to(w);
      auto [crc, bytes] = w.finish();
      m.files.push_back({name, crc, bytes});
    }
    return dir.commit(staging, m, 1000);
  }

  // Back to the state of a checkpoint (a ps restored by its chief).
  void restore(const std::string& checkpoint_path) {
    truth = std::make_unique<embedding_table>(table_config());
    checkpoint_reader reader(checkpoint_path);
    auto full = table_from_checkpoint(reader, card);
    for (uint32_t b = 0; b < full->config().buckets.count; ++b)
      full->visit(b, [&](int64_t key, const float* value, row_counters) {
        std::vector<float> payload(truth->payload_floats(), 0.1f); // Adagrad's slots
        std::memcpy(payload.data(), value, truth->dim() * sizeof(float));
        truth->restore(key, payload.data(), {});
      });
    step = reader.manifest().step;
    dense = load_model(checkpoint_path).params;
  }

  std::string root;
  model_options options;
  std::unique_ptr<model> net;
  model_card card;
  std::unique_ptr<embedding_table> truth;
  std::vector<tensor> dense;
  int64_t step = 0;
  std::mt19937_64 rng{5};
};

std::map<int64_t, std::vector<uint32_t>> rows_by_key(const embedding_table& table) {
  std::map<int64_t, std::vector<uint32_t>> out;
  for (uint32_t b = 0; b < table.config().buckets.count; ++b)
    table.visit(b, [&](int64_t key, const float* value, row_counters) {
      auto& bits = out[key];
      bits.resize(table.dim());
      std::memcpy(bits.data(), value, table.dim() * sizeof(float));
    });
  return out;
}

// The served model at its version against the full export of the
// checkpoint it was made from: the same keys, every value and every dense
// variable the same bits.
void require_equal(const served_model& served, const std::string& checkpoint_path) {
  auto full = load_model(checkpoint_path);
  BOOST_TEST(served.model.card.step == full.card.step);
  BOOST_REQUIRE(rows_by_key(*served.model.table) == rows_by_key(*full.table));
  BOOST_REQUIRE(served.model.params.size() == full.params.size());
  for (size_t i = 0; i < full.params.size(); ++i)
    BOOST_REQUIRE(std::memcmp(served.model.params[i].data(), full.params[i].data(),
                              full.params[i].size() * sizeof(float))
                  == 0);
}

template <class F>
std::string error_of(F f) {
  return testing::message_of<troupe_error>(f);
}

} // namespace

BOOST_AUTO_TEST_SUITE(delta_export)

// Ten versions: rows updated, evicted and re-admitted between deltas, the
// table restored to an older checkpoint (a ps lost), then resharded from
// one shard to three, and the series resumed by a new chief. After each,
// the chain equals the checkpoint's full export, and a delta holds only the
// rows that changed.
BOOST_AUTO_TEST_CASE(base_and_deltas_equal_the_full_export_of_every_version) {
  temp_dir d;
  fake_run run(d.file("logs"));
  auto serving = d.file("logs/serving");
  auto series = std::make_unique<delta_series>(serving, run.root + "/model.json", 4);
  BOOST_TEST(contains(series->resume(run.root), "none yet"));
  std::vector<std::string> checkpoints;
  auto version = [&](uint32_t shards) {
    checkpoints.push_back(run.checkpoint(shards));
    BOOST_TEST(!series->add(checkpoints.back()).empty());
    auto served = load_version(serving);
    BOOST_TEST(served.version == static_cast<int64_t>(checkpoints.size()));
    require_equal(served, checkpoints.back());
  };
  run.train(2000, 5000);
  version(1); // base 1
  run.train(50, 5000);
  version(1); // delta 2: about 50 rows
  auto header = delta_header::from_json(
    json::parse(read_file_bounded(delta_path(serving, 2), 1 << 16)), "delta");
  BOOST_TEST(header.rows <= 50u);
  BOOST_TEST(header.rows >= 40u);
  BOOST_TEST(header.deleted == 0u);
  run.evict({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  run.train(30, 5000);
  version(1);                  // delta 3: deletions
  run.train(500, 20);          // re-admits most of 1..10
  version(1);                  // delta 4, then base 5 with delta 5 (base-every 4)
  run.restore(checkpoints[1]); // a ps lost: back to version 2's state
  run.train(40, 5000);
  version(1);
  run.train(40, 5000);
  version(3); // resharded onto three shards
  // The chief restarts: its fingerprints are gone, the series resumes from
  // the checkpoint of its newest version.
  series = std::make_unique<delta_series>(serving, run.root + "/model.json", 4);
  BOOST_TEST(contains(series->resume(run.root), "go on from 6"));
  run.evict({100, 101, 102});
  run.train(60, 5000);
  version(3);
  run.train(60, 5000);
  version(2);
  auto listing = list_versions(serving);
  BOOST_TEST((listing.bases == std::vector<int64_t>{1, 5}));
  BOOST_TEST((listing.deltas == std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8}));
  // Every version from the first base: the chain, not the newest base.
  for (int64_t v = 1; v <= 8; ++v)
    require_equal(load_version(serving, v), checkpoints[static_cast<size_t>(v - 1)]);
  // The same checkpoint again makes no version.
  BOOST_TEST(series->add(checkpoints.back()).empty());
}

// The chief restarted where the checkpoint of the newest version is gone:
// the next version is a base, and the chain goes on from it.
BOOST_AUTO_TEST_CASE(a_series_without_its_last_checkpoint_goes_on_with_a_base) {
  temp_dir d;
  fake_run run(d.file("logs"));
  auto serving = d.file("logs/serving");
  delta_series first(serving, run.root + "/model.json", 100);
  run.train(300, 1000);
  auto a = run.checkpoint(1);
  first.add(a);
  run.train(30, 1000);
  auto b = run.checkpoint(1);
  first.add(b);
  fs::remove_all(b);
  delta_series second(serving, run.root + "/model.json", 100);
  BOOST_TEST(contains(second.resume(run.root), "the next is a base"));
  run.train(30, 1000);
  auto c = run.checkpoint(1);
  BOOST_TEST(contains(second.add(c), "base of"));
  BOOST_TEST((list_versions(serving).bases == std::vector<int64_t>{1, 3}));
  require_equal(load_version(serving), c);
}

// Damaged, out of order, not finite: refused whole, both versions named,
// the model unchanged; a gap ends the chain where it is.
BOOST_AUTO_TEST_CASE(a_delta_that_does_not_apply_is_refused_naming_both_versions) {
  temp_dir d;
  fake_run run(d.file("logs"));
  auto serving = d.file("logs/serving");
  delta_series series(serving, run.root + "/model.json", 100);
  std::vector<std::string> checkpoints;
  for (int i = 0; i < 4; ++i) {
    run.train(200, 1000);
    checkpoints.push_back(run.checkpoint(1));
    series.add(checkpoints.back());
  }
  // Not finite: a delta 5 written with a NaN row.
  auto newest = load_version(serving);
  BOOST_TEST(newest.version == 4);
  table_change bad;
  bad.keys = {5};
  bad.values.assign(newest.model.table->dim(), std::nanf(""));
  write_delta(serving, {5, 4, 999}, bad, newest.model.table->dim(), run.net->variables(),
              run.dense);
  BOOST_TEST(contains(error_of([&] { read_delta(delta_path(serving, 5), newest.model); }),
                      "delta 5 (applies to version 4): a row's value is not finite"));
  fs::remove(delta_path(serving, 5));
  // Out of order: delta 3 on version 1.
  auto served = load_version(serving, 1);
  auto before = rows_by_key(*served.model.table);
  auto third = read_delta(delta_path(serving, 3), served.model);
  BOOST_TEST(contains(error_of([&] { apply_delta(served, third); }),
                      "delta 3 (applies to version 2): the model is at version 1: versions 2..2 "
                      "are missing"));
  BOOST_TEST(served.version == 1);
  BOOST_TEST((rows_by_key(*served.model.table) == before));
  // A gap: without delta 3's header the chain ends at version 2.
  auto header3 = read_file_bounded(delta_path(serving, 3), 1 << 16);
  fs::remove(delta_path(serving, 3));
  BOOST_TEST(load_version(serving).version == 2);
  write_file_atomically(delta_path(serving, 3), header3);
  // Damaged: one byte of delta 2's file changed.
  auto file = serving + "/" + version_name("delta", 2) + ".safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  auto damaged = error_of([&] { read_delta(delta_path(serving, 2), served.model); });
  BOOST_TEST(contains(damaged, "delta 2 (applies to version 1): "));
  BOOST_TEST(contains(damaged, "damaged or replaced; refused"));
  BOOST_TEST(contains(error_of([&] { load_version(serving); }), "delta 2"));
  BOOST_TEST(contains(error_of([&] { load_version(serving, 0); }), "holds no base at or before"));
}

// A model without a table: its deltas are its dense variables alone.
BOOST_AUTO_TEST_CASE(a_dense_models_deltas_carry_its_variables) {
  temp_dir d;
  model_options o;
  o.input = {4};
  o.classes = 3;
  auto net = make_model(model_kind::softmax, o);
  auto card = describe_model(model_kind::softmax, *net, nullptr, 1);
  auto values = initial_values(*net, 1);
  write_base(d.file("serving"), 1, card, net->variables(), values, nullptr);
  values[0].data()[2] = 9.5f;
  write_delta(d.file("serving"), {2, 1, 2}, {}, 0, net->variables(), values);
  auto served = load_version(d.file("serving"));
  BOOST_TEST(served.version == 2);
  BOOST_TEST(!served.model.table);
  BOOST_TEST(served.model.params[0].data()[2] == 9.5f);
  BOOST_TEST(served.model.card.step == 2);
}

BOOST_AUTO_TEST_SUITE_END()
